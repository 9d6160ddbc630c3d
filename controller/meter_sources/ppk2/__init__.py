"""A Nordic PPK2 as the sweep's meter: the one on `meter.port`, or without a port the emulated
one driven by the power model. The device library (decoder, session, emulator) is
`controller.meter.ppk2`; here are the sweep's tap, the rig check, the resolution, the modelled
device and `h2iot meter virtual --device ppk2`."""
