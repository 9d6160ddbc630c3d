"""A point's meter floor (`analysis.detectability.MeterFloor`) from what the run's manifest says of
its meter (`meter.resolution`, written by `controller.meter.resolution`) and the point's trials.

The step is that of the range the point's median current falls in (an auto-ranging meter's); the
noise is the meter's stated rms noise per sample (`noise_mw`), or none where the record states
none (a run recorded before meters stated theirs: its floor is the step alone).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.detectability import MeterFloor, meter_floor

if TYPE_CHECKING:  # the controller's early stop reads floors too, without pandas' import
    import pandas as pd

__all__ = [
    "current_text",
    "floor_of",
    "point_floor",
    "positive",
    "range_step",
    "resolution_record",
    "trials_floor",
]


def positive(value: Any) -> float | None:
    """A finite number above zero, as a float; None for anything else."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
    return float(value) if ok and value > 0 else None


def current_text(ua: float) -> str:
    """A current in the unit that keeps it readable (5 A, 26.39 mA, 43.51 uA, 0.5 nA)."""
    for scale, unit in ((1e6, "A"), (1e3, "mA"), (1.0, "uA")):
        if abs(ua) >= scale:
            return f"{ua / scale:.4g} {unit}"
    return f"{ua * 1e3:.4g} nA"


def range_step(resolution: Mapping[str, Any], current_ua: float | None) -> tuple[float, str]:
    """(the step in uA, which range gave it): an auto-ranging meter's step is that of the range
    the current falls in (the finest whose ceiling is above it); without a current, the
    finest's."""
    ranges = [r for r in resolution.get("ranges") or () if isinstance(r, Mapping)]
    steps = [(positive(r.get("current_ua")), positive(r.get("ceiling_ua"))) for r in ranges]
    if not steps or any(step is None for step, _ceiling in steps):
        return float(resolution["current_ua"]), ""
    if current_ua is None:
        return float(resolution["current_ua"]), " (finest range; no median current)"
    for number, (step, ceiling) in enumerate(steps):
        if ceiling is None or current_ua < ceiling:
            assert step is not None
            median = current_text(current_ua)
            return step, f" (range {number}, which the median trial's {median} is in)"
    top = steps[-1][0]
    assert top is not None
    return top, f" (range {len(steps) - 1}, the top one)"


def resolution_record(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The manifest's `meter.resolution` when it has a step and a supply; None otherwise."""
    meter = manifest.get("meter")
    record = meter.get("resolution") if isinstance(meter, Mapping) else None
    if not isinstance(record, Mapping):
        return None
    if positive(record.get("current_ua")) is None or positive(record.get("supply_v")) is None:
        return None
    return record


def floor_of(
    record: Mapping[str, Any], window_s: float, samples: int, mean_power_mw: float | None
) -> MeterFloor:
    """The floor over a trial of `window_s` and `samples` drawing `mean_power_mw` on average,
    from a `meter.resolution` record (see `resolution_record`)."""
    supply_v = float(record["supply_v"])
    current_ua = None if mean_power_mw is None else mean_power_mw / supply_v * 1000
    step_ua, _which = range_step(record, current_ua)
    noise_mw = positive(record.get("noise_mw")) or 0.0
    return meter_floor(step_ua * supply_v / 1000, noise_mw, window_s, samples)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _median(trials: Iterable[Mapping[str, object]], column: str) -> float | None:
    values = [_number(trial.get(column)) for trial in trials]
    finite = [value for value in values if math.isfinite(value)]
    return statistics.median(finite) if finite else None


def trials_floor(
    record: Mapping[str, Any] | None, trials: Iterable[Mapping[str, object]]
) -> MeterFloor | None:
    """The floor over the median of a point's ok trials (trials.csv's rows, as text or numbers:
    the report's and the sweep's alike) from a `meter.resolution` record (`resolution_record`):
    None without a record or a trial with a window."""
    rows = list(trials)
    window_s = _median(rows, "window_s")
    if record is None or window_s is None:
        return None
    samples = _median(rows, "samples")
    return floor_of(record, window_s, round(samples or 0), _median(rows, "mean_power_mw"))


def point_floor(manifest: Mapping[str, Any], rows: pd.DataFrame) -> MeterFloor | None:
    """The floor over a point's median trial (its ok rows): None where the manifest states no
    resolution or the rows have no window."""
    return trials_floor(resolution_record(manifest), rows.to_dict("records"))
