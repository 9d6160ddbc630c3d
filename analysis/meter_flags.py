"""The trials whose meter clipped or lost too many of their samples, judged per trial.

A sample at the meter's full scale (`samples_saturated`) reads less than the load drew, so the
trial's energy is a lower bound; a sample lost (`samples_lost`) is bridged linearly from its
neighbours, so the energy is an interpolation there. The run's config says how many of either
a trial may have (`meter.max_saturated_fraction`, `meter.max_lost_fraction`); a run that
predates those keys is judged by their defaults, and one that predates `samples_saturated` has
no saturated trials to name. Pure reads of a loaded run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.load import Run
from analysis.manifest import config_value
from analysis.trial_columns import MAX_LOST_FRACTION, MAX_SATURATED_FRACTION


@dataclass(frozen=True)
class MeterFlags:
    saturated: tuple[str, ...]  # trial ids over max_saturated_fraction: energy a lower bound
    lost: tuple[str, ...]  # over max_lost_fraction: energy bridged across the gaps
    max_saturated_fraction: float
    max_lost_fraction: float
    recorded_saturation: bool  # the run counted saturated samples (a column with values)


def _limit(run: Run, key: str, default: float) -> float:
    value = config_value(run.manifest, f"meter.{key}")
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if is_number else default


def _counts(ok: pd.DataFrame, column: str) -> pd.Series:
    if column not in ok:
        return pd.Series(np.nan, index=ok.index, dtype=float)
    return pd.to_numeric(ok[column], errors="coerce")


def meter_flags(run: Run) -> MeterFlags:
    """The ok rows over either limit, in trial order (each id once: a trial's ok row)."""
    ok = run.ok
    max_saturated = _limit(run, "max_saturated_fraction", MAX_SATURATED_FRACTION)
    max_lost = _limit(run, "max_lost_fraction", MAX_LOST_FRACTION)
    samples = _counts(ok, "samples")
    saturated = _counts(ok, "samples_saturated")
    lost = _counts(ok, "samples_lost")
    # A comparison with NaN is False: a row without the counts is never flagged.
    over_saturated = saturated > max_saturated * samples
    over_lost = lost > max_lost * (samples + lost)
    ids = ok["trial_id"].astype(str) if "trial_id" in ok else pd.Series(dtype=str)
    return MeterFlags(
        saturated=tuple(dict.fromkeys(ids[over_saturated & (saturated > 0)])),
        lost=tuple(dict.fromkeys(ids[over_lost & (lost > 0)])),
        max_saturated_fraction=max_saturated,
        max_lost_fraction=max_lost,
        recorded_saturation=bool(saturated.notna().any()),
    )
