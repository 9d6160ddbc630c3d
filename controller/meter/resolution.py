"""What a meter can see: the manifest's `meter.resolution` record, the same keys for every
source, so the report and the rig check can say what one step, the noise and the full scale
mean without knowing the meter (data/README.md).

A record (`Resolution.to_dict`):
- `current_ua`: one step of the client's current, in microamperes (an auto-ranging meter's
  finest range);
- `supply_v`: the voltage a step of current is power at, `power_mw` = `current_ua` x `supply_v`;
- `basis`: where the step comes from, in words (the sensor, its ADC or register, the document);
- `ranges` (auto-ranging meters only): each range's step and the largest current it measures,
  finest first, the top range's ceiling `None`; the report takes the range the median trial's
  mean current falls in;
- `sample_rate_hz`: the samples the noise figure is per (the instrument's own rate: a PPK2's
  100 kS/s stream, a Joulescope's 2 MS/s, the board's configured rate);
- `noise_ua` (`None`: not known) and `noise_mw`: the rms noise of one such sample, with
  `noise_basis` naming the datasheet or calibration it comes from;
- `full_scale_ua` and `full_scale_mw`: the current where the top range clips (`None`: unknown);
- `voltage`: "measured" (power is V x I per sample) or "assumed" (`supply_v` times the current);
- `conversion_us`: how long one reading's conversion takes (the ADC's, a chip's result, or one
  sample period of a streaming instrument), `bandwidth_hz` the analog bandwidth where stated.

The step is a step of the reading, not its accuracy: offset and gain error are the calibration's
business (`meter.calibration` in the manifest).

Each source's own figures are in its folder (controller/meter_sources/board/resolution.py for
the board's ACS712 and I2C chips, ppk2/resolution.py; a Joulescope's in controller.meter.jls),
and its declaration's `facts` gives them from a config alone (controller.config.meter_sources).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Voltage = Literal["measured", "assumed"]


@dataclass(frozen=True, slots=True)
class RangeStep:
    current_ua: float
    ceiling_ua: float | None  # the largest current the range measures; None: the top range


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    current_ua: float
    supply_v: float
    basis: str
    sample_rate_hz: float
    noise_ua: float | None
    noise_basis: str
    full_scale_ua: float | None
    voltage: Voltage
    conversion_us: float | None
    bandwidth_hz: float | None = None
    ranges: tuple[RangeStep, ...] = ()

    @property
    def power_mw(self) -> float:
        return self._mw(self.current_ua)

    @property
    def noise_mw(self) -> float | None:
        return None if self.noise_ua is None else self._mw(self.noise_ua)

    @property
    def full_scale_mw(self) -> float | None:
        return None if self.full_scale_ua is None else self._mw(self.full_scale_ua)

    def _mw(self, ua: float) -> float:
        return ua * self.supply_v / 1000.0

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "current_ua": self.current_ua,
            "power_mw": self.power_mw,
            "supply_v": self.supply_v,
            "basis": self.basis,
            "sample_rate_hz": self.sample_rate_hz,
            "noise_ua": self.noise_ua,
            "noise_mw": self.noise_mw,
            "noise_basis": self.noise_basis,
            "full_scale_ua": self.full_scale_ua,
            "full_scale_mw": self.full_scale_mw,
            "voltage": self.voltage,
            "conversion_us": self.conversion_us,
            "bandwidth_hz": self.bandwidth_hz,
        }
        if self.ranges:
            record["ranges"] = [
                {
                    "current_ua": r.current_ua,
                    "power_mw": self._mw(r.current_ua),
                    "ceiling_ua": r.ceiling_ua,
                }
                for r in self.ranges
            ]
        return record


def range_steps(steps_ua: Sequence[float], ceilings_ua: Sequence[float]) -> tuple[RangeStep, ...]:
    """An auto-ranging meter's ranges (the PPK2): a step per range, finest first; `ceilings_ua`
    has one fewer entry than `steps_ua` (the top range's is the meter's full scale)."""
    if len(ceilings_ua) != len(steps_ua) - 1:
        raise ValueError(f"{len(steps_ua)} ranges need {len(steps_ua) - 1} ceilings")
    return tuple(
        RangeStep(step, ceilings_ua[n] if n < len(ceilings_ua) else None)
        for n, step in enumerate(steps_ua)
    )
