"""Whether a difference between two points could be seen: by this run's repetitions, and by its
meter at all.

Two limits, kept apart because they answer differently to more repetitions:
- the **run's limit**, the minimum detectable difference: the smallest true difference a two-sided
  Welch test at the run's confidence finds with probability `power` (80 % by default), given the
  observed spreads and n; more repetitions shrink it as 1/sqrt(n);
- the **meter's floor** (`MeterFloor`): one step of the meter held over a trial's window plus its
  noise averaged over the window's samples. A reading off by one step for a whole trial (an
  offset, a code the signal never dithers across) shifts its energy by the first term in every
  repetition, so no n takes a difference below it out of the meter's reach.

A difference is `resolved` when it is above both, `needs_repetitions` when only the run's n is short
(with the n that would do), `below_meter_floor` when no n helps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy.special import stdtrit

from analysis.stats import DEFAULT_CONFIDENCE, Summary, welch_df

__all__ = [
    "DEFAULT_POWER",
    "MAX_REPETITIONS",
    "MeterFloor",
    "Resolvability",
    "Verdict",
    "meter_floor",
    "min_detectable_difference",
    "repetitions_needed",
    "resolvability",
]

DEFAULT_POWER = 0.80
# Where the search for n gives up: past this, a difference is for practical purposes out of
# reach of repetition (a run of 100,000 trials per point is months on a Pi).
MAX_REPETITIONS = 100_000

Verdict = Literal["resolved", "needs_repetitions", "below_meter_floor", "unknown"]


@dataclass(frozen=True, slots=True)
class MeterFloor:
    """What a meter's step and noise amount to over one trial's window, in mJ."""

    step_mj: float  # one step of power held over the window: a bias repetition does not average
    noise_mj: float  # the meter's rms noise per sample, averaged over the window's samples

    @property
    def total_mj(self) -> float:
        return self.step_mj + self.noise_mj


def meter_floor(step_mw: float, noise_mw: float, window_s: float, samples: int) -> MeterFloor:
    """The floor over a window of `window_s` seconds and `samples` samples: the step held over
    it, and the noise's rms over the window (noise_mw x window / sqrt(samples): independent
    samples' noise averages down within a trial)."""
    if step_mw < 0 or noise_mw < 0 or window_s < 0:
        raise ValueError(f"a floor needs non-negative figures: {step_mw}, {noise_mw}, {window_s}")
    noise_mj = noise_mw * window_s / math.sqrt(samples) if samples > 0 else noise_mw * window_s
    return MeterFloor(step_mw * window_s, noise_mj)


def min_detectable_difference(
    sd_a: float,
    n_a: int,
    sd_b: float,
    n_b: int,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    power: float = DEFAULT_POWER,
) -> float:
    """(t_(1+c)/2 + t_power) x the difference's standard error, at the Welch-Satterthwaite df:
    the true difference a two-sided test at `confidence` detects with probability `power`. NaN
    when either side has fewer than two values."""
    if not 0 < power < 1:
        raise ValueError(f"power {power} must be between 0 and 1")
    if n_a < 2 or n_b < 2 or math.isnan(sd_a) or math.isnan(sd_b):
        return math.nan
    va, vb = sd_a**2 / n_a, sd_b**2 / n_b
    se = math.sqrt(va + vb)
    if se == 0:
        return 0.0
    df = welch_df(va, vb, n_a, n_b)
    return (float(stdtrit(df, (1 + confidence) / 2)) + float(stdtrit(df, power))) * se


def repetitions_needed(
    sd_a: float,
    sd_b: float,
    difference: float,
    confidence: float = DEFAULT_CONFIDENCE,
    power: float = DEFAULT_POWER,
) -> int | None:
    """The fewest repetitions per point (the same at both) whose minimum detectable difference
    is at most |difference|, at the given spreads; None when it is past `MAX_REPETITIONS` or
    cannot be said (no difference, an unknown spread)."""
    target = abs(difference)
    if target == 0 or math.isnan(target) or math.isnan(sd_a) or math.isnan(sd_b):
        return None
    if sd_a == 0 and sd_b == 0:
        return 2

    def detects(n: int) -> bool:
        return (
            min_detectable_difference(sd_a, n, sd_b, n, confidence=confidence, power=power)
            <= target
        )

    if detects(2):
        return 2
    high = 4
    while not detects(high):
        if high >= MAX_REPETITIONS:
            return None
        high = min(high * 2, MAX_REPETITIONS)
    low = high // 2  # does not detect; high does
    while high - low > 1:
        middle = (low + high) // 2
        if detects(middle):
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True, slots=True)
class Resolvability:
    """One difference (b - a) against what the run and its meter can see."""

    difference: float
    min_detectable: float  # at the run's n (NaN: either side has fewer than two values)
    floor_mj: float | None  # the larger of the two points' meter floors; None: not known
    repetitions: int | None  # per point, for the observed difference at the observed spread
    verdict: Verdict

    @property
    def above_floor(self) -> bool | None:
        if self.floor_mj is None or math.isnan(self.difference):
            return None
        return abs(self.difference) > self.floor_mj

    def text(self, unit: str = "mJ") -> str:
        """One phrase for a table cell."""
        if self.verdict == "below_meter_floor":
            return (
                f"below the meter's floor ({self.floor_mj:.3g} {unit}): no number of "
                "repetitions resolves it"
            )
        if self.verdict == "needs_repetitions":
            needed = (
                f"{self.repetitions} repetitions per point would"
                if self.repetitions is not None
                else f"more than {MAX_REPETITIONS} repetitions per point would"
            )
            return (
                f"below this run's detectable {self.min_detectable:.3g} {unit}; {needed} "
                "at the observed spread"
            )
        if self.verdict == "resolved":
            floor = "" if self.floor_mj is None else f", meter floor {self.floor_mj:.3g} {unit}"
            return f"resolved (detectable {self.min_detectable:.3g} {unit}{floor})"
        return "not known (fewer than two values at a point)"


def resolvability(
    a: Summary,
    b: Summary,
    floor_mj: float | None,
    confidence: float | None = None,
    power: float = DEFAULT_POWER,
) -> Resolvability:
    """Where the observed difference b - a stands: at the confidence of the summaries unless
    given. A difference within the meter's floor is `below_meter_floor` whatever n says."""
    level = a.confidence if confidence is None else confidence
    difference = b.mean - a.mean
    detectable = min_detectable_difference(a.sd, a.n, b.sd, b.n, confidence=level, power=power)
    if math.isnan(difference) or math.isnan(detectable):
        return Resolvability(difference, detectable, floor_mj, None, "unknown")
    if floor_mj is not None and abs(difference) <= floor_mj:
        return Resolvability(difference, detectable, floor_mj, None, "below_meter_floor")
    if abs(difference) < detectable:
        needed = repetitions_needed(a.sd, b.sd, difference, level, power)
        return Resolvability(difference, detectable, floor_mj, needed, "needs_repetitions")
    return Resolvability(difference, detectable, floor_mj, None, "resolved")
