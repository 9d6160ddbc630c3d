"""The meter sources a sweep reads, a folder each: `serial` (the Arduino sketch on a port),
`virtual` (its frames from the power model on a pty), `simavr` (the real firmware in the AVR
simulator) and `ppk2` (a Nordic PPK2, real or emulated); `board` holds what the three board
sources share (the firmware's frames: their tap, rig check and resolution).

A folder holds its source's `spec.py` (data, light to import) and what the spec points at: the
sweep's tap, the rig check, its modelled device, its `h2iot meter` verbs. The registry is
`controller.config.meter_sources`; the device libraries the folders drive stay in
`controller.meter` (the board's session, the virtual and simulated meters, the PPK2's
decoder and session). Adding a source: controller/meter/README.md.
"""
