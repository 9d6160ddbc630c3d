"""Summary statistics with t-based confidence intervals, and the study's sample-size formula.

Every metric in a report carries n, mean, standard deviation (n - 1 in the denominator), median
and a two-sided Student-t confidence interval at the run's confidence (0.90 by default, as the
study). With n = 1 the interval is undefined (NaN); with zero variance it collapses to the mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

# scipy.special's quantiles are the same functions scipy.stats calls, at a third of its import
# cost: the controller imports this module for the live dashboard.
from scipy.special import ndtri, stdtrit

DEFAULT_CONFIDENCE = 0.90


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    sd: float
    median: float
    ci_low: float
    ci_high: float
    confidence: float

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


def t_quantile(confidence: float, n: int) -> float:
    """The two-sided Student-t critical value for `n` observations."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} must be between 0 and 1")
    return float(stdtrit(n - 1, (1 + confidence) / 2))


def t_quantile_df(confidence: float, df: float) -> float:
    """The two-sided Student-t critical value at `df` degrees of freedom (not an integer for
    Welch-Satterthwaite)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} must be between 0 and 1")
    return float(stdtrit(df, (1 + confidence) / 2))


def summarize(values: Iterable[float], confidence: float = DEFAULT_CONFIDENCE) -> Summary:
    data = np.asarray(list(values), dtype=np.float64)
    n = int(data.size)
    if n == 0:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, confidence)
    mean = float(data.mean())
    median = float(np.median(data))
    if n == 1:
        return Summary(1, mean, math.nan, median, math.nan, math.nan, confidence)
    sd = float(data.std(ddof=1))
    half = t_quantile(confidence, n) * sd / math.sqrt(n)
    return Summary(n, mean, sd, median, mean - half, mean + half, confidence)


def cochran_sample_size(
    confidence: float = DEFAULT_CONFIDENCE, margin: float = 0.10, proportion: float = 0.5
) -> int:
    """Sample size for an infinite population (Cochran): z^2 p (1 - p) / e^2, rounded up.

    The study's 68 page fetches per setting is this formula at 90 % confidence, p = 0.5 and a
    10 % margin (1.645^2 x 0.25 / 0.01 = 67.6)."""
    z = float(ndtri((1 + confidence) / 2))
    return math.ceil(z * z * proportion * (1 - proportion) / (margin * margin))


def repetitions_for_relative_half_width(summary: Summary, relative: float) -> int | None:
    """Repetitions needed for a CI half-width of `relative` x mean, from a pilot's spread.

    Uses the normal quantile of the infinite-population formula, n = (z sd / (r mean))^2;
    None when the pilot cannot say (fewer than 2 values or a zero mean)."""
    if summary.n < 2 or summary.mean == 0 or math.isnan(summary.sd):
        return None
    z = float(ndtri((1 + summary.confidence) / 2))
    return max(2, math.ceil((z * summary.sd / (relative * abs(summary.mean))) ** 2))


@dataclass(frozen=True)
class Difference:
    """mean(b) - mean(a) with a two-sided Welch t interval (NaN when either side has n < 2)."""

    estimate: float
    ci_low: float
    ci_high: float
    df: float
    confidence: float

    @property
    def excludes_zero(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0


def welch_df(va: float, vb: float, n_a: int, n_b: int) -> float:
    """The Welch-Satterthwaite degrees of freedom of a difference of two means whose squared
    standard errors are `va` and `vb` (infinite when both are zero: no spread to estimate)."""
    if va + vb == 0:
        return math.inf
    return (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))


def welch_difference(a: Summary, b: Summary, confidence: float = DEFAULT_CONFIDENCE) -> Difference:
    """The difference of two independent means, unequal variances (Welch-Satterthwaite df)."""
    estimate = b.mean - a.mean
    if a.n < 2 or b.n < 2:
        return Difference(estimate, math.nan, math.nan, math.nan, confidence)
    va, vb = a.sd**2 / a.n, b.sd**2 / b.n
    se = math.sqrt(va + vb)
    if se == 0:
        return Difference(estimate, estimate, estimate, math.inf, confidence)
    df = welch_df(va, vb, a.n, b.n)
    half = float(stdtrit(df, (1 + confidence) / 2)) * se
    return Difference(estimate, estimate - half, estimate + half, df, confidence)
