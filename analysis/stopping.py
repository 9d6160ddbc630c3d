"""The sweep engine's optional early stop for one grid point.

A point may stop repeating once its t-based confidence interval is narrow enough relative to its
mean: half-width <= target x |mean|, with at least `min_n` values (never fewer than 2, since one
value has no interval). The engine calls it after each repetition with the values so far; the
configured repetition count stays the ceiling.

For an energy metric the target is never below the meter's floor over the point's window
(analysis.detectability): no number of repetitions resolves less than one step held over a
trial, so an interval narrower than that is not worth trials. The stop says when the floor, not
the target, set the width it stopped at.

Peeking at an interval after every value and stopping when it is narrow makes the nominal
coverage slightly optimistic; a generous `min_n` (a pilot's `reps_needed`) keeps that small.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from analysis.stats import summarize

__all__ = ["Settled", "settled", "should_stop"]


@dataclass(frozen=True, slots=True)
class Settled:
    """A point that may stop: its interval and the width it was held to."""

    n: int
    half_width: float
    target_half_width: float  # target x |mean|
    floor: float  # the meter's floor in the metric's unit; 0 when it has none

    @property
    def by_floor(self) -> bool:
        """The floor, not the target, set the width the point stopped at."""
        return self.floor > self.target_half_width


def settled(
    values: Iterable[float],
    confidence: float,
    target_relative_half_width: float,
    min_n: int,
    floor: float = 0.0,
) -> Settled | None:
    """The point's interval when it has enough values and a CI half-width within
    max(target x |mean|, floor); None while it needs more.

    NaN values (a metric the trial could not measure) do not count towards n."""
    if not target_relative_half_width > 0:
        raise ValueError(f"target_relative_half_width {target_relative_half_width} must be > 0")
    if not floor >= 0:
        raise ValueError(f"floor {floor} must be >= 0")
    data = [float(v) for v in values if not math.isnan(float(v))]
    if len(data) < max(min_n, 2):
        return None
    summary = summarize(data, confidence)
    target = target_relative_half_width * abs(summary.mean)
    if summary.half_width > max(target, floor):
        return None
    return Settled(summary.n, summary.half_width, target, floor)


def should_stop(
    values: Iterable[float],
    confidence: float,
    target_relative_half_width: float,
    min_n: int,
    floor: float = 0.0,
) -> bool:
    """True when the point has enough values and a CI half-width within max(target x |mean|,
    floor) (`settled`)."""
    return settled(values, confidence, target_relative_half_width, min_n, floor) is not None
