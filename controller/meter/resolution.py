"""One step of a meter: the manifest's `meter.resolution` record, the same keys for every source,
so the report can say what one step means in mJ without knowing the meter (data/README.md).

A record (`Resolution.to_dict`):
- `current_ua`: one step of the client's current, in microamperes (an auto-ranging meter's
  finest range);
- `supply_v`: the voltage a step of current is power at, `power_mw` = `current_ua` x `supply_v`;
- `basis`: where the figure comes from, in words (the sensor, its ADC or register, the document);
- `ranges` (auto-ranging meters only): each range's step and the largest current it measures,
  finest first, the top range's ceiling `None`; the report takes the range the median trial's
  mean current falls in.

The figures are a step of the reading, not its accuracy: noise, offset and gain error are the
calibration's business (`meter.calibration` in the manifest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from controller.meter.calibration import Calibration
from controller.meter.ppk2.decoder import ua_per_code
from controller.meter.ppk2.device import RANGE_CEILINGS_UA
from controller.meter.ppk2.metadata import Ppk2Metadata

# Joulescope's published current resolution at its finest range (product pages and user's
# guides, joulescope.com: JS220 0.5 nA, JS110 1.5 nA). Recordings carry no range steps, and the
# ranges a Pi-class load uses (180 mA, 10 A) resolve coarser: this is the instrument's best.
JOULESCOPE_FINEST_STEP_NA = {"JS220": 0.5, "JS110": 1.5}


class I2cChip(Protocol):
    """An INA219 or INA226 calibration (controller/meter/ina219.py, ina226.py)."""

    @property
    def kind(self) -> str: ...

    @property
    def shunt_ohm(self) -> float: ...

    @property
    def current_step_a(self) -> float: ...


@dataclass(frozen=True, slots=True)
class RangeStep:
    current_ua: float
    ceiling_ua: float | None  # the largest current the range measures; None: the top range


@dataclass(frozen=True, slots=True)
class Resolution:
    current_ua: float
    supply_v: float
    basis: str
    ranges: tuple[RangeStep, ...] = ()

    @property
    def power_mw(self) -> float:
        return self.current_ua * self.supply_v / 1000.0

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "current_ua": self.current_ua,
            "power_mw": self.power_mw,
            "supply_v": self.supply_v,
            "basis": self.basis,
        }
        if self.ranges:
            record["ranges"] = [
                {
                    "current_ua": r.current_ua,
                    "power_mw": r.current_ua * self.supply_v / 1000.0,
                    "ceiling_ua": r.ceiling_ua,
                }
                for r in self.ranges
            ]
        return record


def acs712(calibration: Calibration, analog_input: int) -> Resolution:
    """One ADC code on an ACS712 channel: the ADC's step over the sensor's sensitivity."""
    channel = calibration.channel(analog_input)
    step_ua = calibration.lsb_mv / channel.sensitivity_mv_per_a * 1e6
    return Resolution(
        step_ua,
        channel.supply_v,
        f"ACS712-{channel.variant} on A{analog_input}: {calibration.adc_bits}-bit ADC step "
        f"{calibration.lsb_mv:.4g} mV / {channel.sensitivity_mv_per_a:g} mV/A",
    )


def i2c_chip(chip: I2cChip, supply_v: float) -> Resolution:
    """One LSB of an INA219's or INA226's shunt register through its shunt, at the nominal
    supply (the chip measures the bus voltage too; its step adds I x one bus LSB, far smaller)."""
    return Resolution(
        chip.current_step_a * 1e6,
        supply_v,
        f"{chip.kind.upper()} shunt register LSB over {chip.shunt_ohm:g} ohm",
    )


def tap_resolution(
    calibration: Calibration, client_channel: int, chip: I2cChip | None
) -> Resolution:
    """The client channel's step on the Arduino meter: its ACS712, or its I2C chip at the
    config's supply (the nominal calibration holds it for every source)."""
    if chip is None:
        return acs712(calibration, client_channel)
    return i2c_chip(chip, calibration.channels[0].supply_v)


def ranged(
    steps_ua: Sequence[float], ceilings_ua: Sequence[float], supply_v: float, basis: str
) -> Resolution:
    """An auto-ranging meter (the PPK2): a step per range, finest first; `ceilings_ua` has one
    fewer entry than `steps_ua` (the top range has none)."""
    if len(ceilings_ua) != len(steps_ua) - 1:
        raise ValueError(f"{len(steps_ua)} ranges need {len(steps_ua) - 1} ceilings")
    ranges = tuple(
        RangeStep(step, ceilings_ua[n] if n < len(ceilings_ua) else None)
        for n, step in enumerate(steps_ua)
    )
    return Resolution(min(steps_ua), supply_v, basis, ranges)


def ppk2(metadata: Ppk2Metadata, supply_v: float) -> Resolution:
    """A PPK2's ranges from its own calibration (one ADC code each, `decoder.ua_per_code`),
    with the emulator's range ceilings: the device switches with hysteresis at thresholds it
    does not report, near these."""
    return ranged(
        [ua_per_code(c) for c in metadata.ranges],
        RANGE_CEILINGS_UA,
        supply_v,
        "PPK2 14-bit ADC code per range, from the device's calibration (metadata R, GI, UG); "
        "range ceilings as the emulator switches (the device's thresholds are near them)",
    )


def joulescope(model: str, supply_v: float) -> Resolution:
    """A Joulescope's documented finest step (module constant); an unknown model gets the
    JS110's, the coarser of the two."""
    known = model.upper() if model.upper() in JOULESCOPE_FINEST_STEP_NA else None
    step_na = JOULESCOPE_FINEST_STEP_NA[known or "JS110"]
    named = known or f"{model or 'unknown model'} (taken as a JS110)"
    return Resolution(
        step_na / 1000.0,
        supply_v,
        f"{named}: {step_na:g} nA, the documented resolution at its finest range (joulescope.com)"
        "; the ranges a Pi-class load uses resolve coarser, and the recording names no range "
        "step; power at the config's supply_v",
    )
