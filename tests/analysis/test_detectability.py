"""The run's and the meter's limits on a difference (analysis/detectability.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.detectability import (
    MAX_REPETITIONS,
    meter_floor,
    min_detectable_difference,
    repetitions_needed,
    resolvability,
)
from analysis.stats import summarize, welch_difference

spreads = st.floats(0.01, 100.0)
counts = st.integers(2, 500)


@given(spreads, spreads, counts)
def test_more_repetitions_never_detect_less(sd_a: float, sd_b: float, n: int) -> None:
    assert min_detectable_difference(sd_a, n + 1, sd_b, n + 1) <= min_detectable_difference(
        sd_a, n, sd_b, n
    )


@given(spreads, spreads, st.floats(0.01, 100.0))
def test_repetitions_needed_is_the_fewest_that_detect(sd_a: float, sd_b: float, d: float) -> None:
    n = repetitions_needed(sd_a, sd_b, d)
    if n is None:
        assert min_detectable_difference(sd_a, MAX_REPETITIONS, sd_b, MAX_REPETITIONS) > d
        return
    assert min_detectable_difference(sd_a, n, sd_b, n) <= d
    if n > 2:
        assert min_detectable_difference(sd_a, n - 1, sd_b, n - 1) > d


def test_the_large_sample_formula_is_approached() -> None:
    """Equal spreads, large n: 2 (z_.95 + z_.80)^2 sd^2 / d^2, the textbook two-sample size."""
    z = 1.6449 + 0.8416
    assert repetitions_needed(1.0, 1.0, 0.05) == pytest.approx(2 * z * z / 0.05**2, rel=0.01)


def test_a_difference_at_the_detectable_size_is_found_four_times_in_five() -> None:
    """Simulated: normal trials whose true difference is the minimum detectable one are
    told apart by the Welch interval (excluding zero) in about 80 % of runs."""
    rng = np.random.default_rng(38)
    n, sd = 20, 3.0
    delta = min_detectable_difference(sd, n, sd, n)
    found = 0
    runs = 4000
    for _ in range(runs):
        a = summarize(rng.normal(100.0, sd, n))
        b = summarize(rng.normal(100.0 + delta, sd, n))
        found += welch_difference(a, b).excludes_zero
    assert found / runs == pytest.approx(0.80, abs=0.03)


def test_the_floor_is_a_step_over_the_window_and_noise_averaged_over_its_samples() -> None:
    floor = meter_floor(step_mw=132.0, noise_mw=40.0, window_s=2.0, samples=400)
    assert floor.step_mj == pytest.approx(264.0)
    assert floor.noise_mj == pytest.approx(40.0 * 2.0 / 20)
    assert floor.total_mj == pytest.approx(268.0)
    with pytest.raises(ValueError, match="non-negative"):
        meter_floor(-1.0, 0.0, 1.0, 1)


def test_verdicts() -> None:
    a = summarize([100.0, 101.0, 99.0, 100.5, 99.5])
    close = summarize([100.4, 101.4, 99.4, 100.9, 99.9])
    far = summarize([110.0, 111.0, 109.0, 110.5, 109.5])
    assert resolvability(a, far, floor_mj=1.0).verdict == "resolved"
    below = resolvability(a, far, floor_mj=20.0)
    assert below.verdict == "below_meter_floor" and below.above_floor is False
    assert "no number of repetitions" in below.text()
    short = resolvability(a, close, floor_mj=0.01)
    assert short.verdict == "needs_repetitions"
    assert short.repetitions is not None and short.repetitions > 5
    assert f"{short.repetitions} repetitions per point" in short.text()
    assert resolvability(summarize([1.0]), a, None).verdict == "unknown"
    assert math.isnan(min_detectable_difference(1.0, 1, 1.0, 5))
