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

Each source's own figures are in its folder (controller/meter_sources/board/resolution.py for
the board's ACS712 and I2C chips, ppk2/resolution.py; a Joulescope's in controller.meter.jls).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


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
