"""The sweep engine's optional early stop for one grid point.

A point may stop repeating once its t-based confidence interval is narrow enough relative to its
mean: half-width <= target x |mean|, with at least `min_n` values (never fewer than 2, since one
value has no interval). The engine calls it after each repetition with the values so far; the
configured repetition count stays the ceiling.

Peeking at an interval after every value and stopping when it is narrow makes the nominal
coverage slightly optimistic; a generous `min_n` (a pilot's `reps_needed`) keeps that small.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from analysis.stats import summarize


def should_stop(
    values: Iterable[float],
    confidence: float,
    target_relative_half_width: float,
    min_n: int,
) -> bool:
    """True when the point has enough values and a CI half-width <= target x |mean|.

    NaN values (a metric the trial could not measure) do not count towards n."""
    if not target_relative_half_width > 0:
        raise ValueError(f"target_relative_half_width {target_relative_half_width} must be > 0")
    data = [float(v) for v in values if not math.isnan(float(v))]
    if len(data) < max(min_n, 2):
        return False
    summary = summarize(data, confidence)
    return summary.half_width <= target_relative_half_width * abs(summary.mean)
