"""The meter sources a sweep can read, declared once: what each one's bytes are and when the
sweep runs the device itself. The config, the sweep's set-up, the rig check and the device
emulation ask this table instead of naming sources (data only: the config is imported on SSH
nodes, which have no meter code).

- `serial`: the Arduino sketch on `meter.port` (ACS712, INA219, INA226), its frames.
- `virtual`: the firmware's frames from the power model of the local nodes, on a pty.
- `simavr`: the real firmware in the AVR simulator, its ADC and I2C parts fed the same way.
- `ppk2`: a Nordic PPK2's sample words, from the one on `meter.port`, or without a port the
  emulated PPK2 driven by the power model.

How a modelled source's device is built is declared beside its meter code, in
`controller.meter.modelled_device` (one entry per source modelled here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MeterSource = Literal["serial", "virtual", "simavr", "ppk2"]
Wire = Literal["board", "ppk2"]
Modelled = Literal["always", "without_port", "never"]


@dataclass(frozen=True)
class MeterSourceSpec:
    name: MeterSource
    wire: Wire  # "board": the firmware's frames (firmware/PROTOCOL.md); "ppk2": its sample words
    modelled: Modelled  # when the sweep runs the device from the local nodes' power model

    def is_modelled(self, port: str | None) -> bool:
        return self.modelled == "always" or (self.modelled == "without_port" and not port)

    @property
    def needs_port(self) -> bool:
        return self.modelled == "never"


METER_SOURCE_SPECS: dict[MeterSource, MeterSourceSpec] = {
    "serial": MeterSourceSpec("serial", "board", "never"),
    "virtual": MeterSourceSpec("virtual", "board", "always"),
    "simavr": MeterSourceSpec("simavr", "board", "always"),
    "ppk2": MeterSourceSpec("ppk2", "ppk2", "without_port"),
}
METER_SOURCES: tuple[MeterSource, ...] = tuple(METER_SOURCE_SPECS)
