from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from analysis.stats import (
    cochran_sample_size,
    repetitions_for_relative_half_width,
    summarize,
    welch_difference,
)


def test_the_studys_68_comes_from_cochran_at_90_percent() -> None:
    assert cochran_sample_size(0.90, margin=0.10) == 68


def test_hand_computed_case() -> None:
    summary = summarize([1.0, 2.0, 3.0, 4.0], confidence=0.90)
    assert summary.mean == 2.5
    assert summary.sd == pytest.approx(math.sqrt(5 / 3))
    # t(0.95, 3) = 2.353363
    assert summary.half_width == pytest.approx(2.353363 * math.sqrt(5 / 3) / 2, rel=1e-6)
    assert summary.median == 2.5


def test_one_value_and_zero_variance() -> None:
    one = summarize([7.0])
    assert (one.n, one.mean) == (1, 7.0)
    assert math.isnan(one.ci_low) and math.isnan(one.sd)
    flat = summarize([3.0] * 5)
    assert (flat.ci_low, flat.ci_high, flat.sd) == (3.0, 3.0, 0.0)
    assert summarize([]).n == 0


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=50), st.sampled_from([0.8, 0.9, 0.95]))
def test_interval_matches_scipy(values: list[float], confidence: float) -> None:
    summary = summarize(values, confidence)
    data = np.array(values)
    if data.std(ddof=1) == 0:
        return
    low, high = scipy_stats.t.interval(
        confidence, len(values) - 1, loc=data.mean(), scale=scipy_stats.sem(data)
    )
    assert summary.ci_low == pytest.approx(low, rel=1e-9, abs=1e-9)
    assert summary.ci_high == pytest.approx(high, rel=1e-9, abs=1e-9)


def test_repetitions_for_a_target_half_width() -> None:
    pilot = summarize([10.0, 12.0, 8.0, 11.0, 9.0])
    needed = repetitions_for_relative_half_width(pilot, 0.05)
    assert needed is not None and needed > pilot.n
    assert repetitions_for_relative_half_width(summarize([1.0]), 0.05) is None


@given(
    st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=30),
    st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=30),
    st.sampled_from([0.8, 0.9, 0.95]),
)
def test_welch_difference_matches_scipy(a: list[float], b: list[float], confidence: float) -> None:
    if np.std(a, ddof=1) < 1e-6 or np.std(b, ddof=1) < 1e-6:
        return
    difference = welch_difference(summarize(a), summarize(b), confidence)
    result = scipy_stats.ttest_ind(b, a, equal_var=False)
    interval = result.confidence_interval(confidence)
    assert difference.estimate == pytest.approx(np.mean(b) - np.mean(a), abs=1e-9)
    assert difference.df == pytest.approx(result.df, rel=1e-9)
    assert difference.ci_low == pytest.approx(interval.low, rel=1e-7, abs=1e-7)
    assert difference.ci_high == pytest.approx(interval.high, rel=1e-7, abs=1e-7)


def test_welch_difference_edge_cases() -> None:
    flat = welch_difference(summarize([1.0, 1.0]), summarize([3.0, 3.0]))
    assert (flat.estimate, flat.ci_low, flat.ci_high) == (2.0, 2.0, 2.0)
    assert flat.excludes_zero
    one = welch_difference(summarize([1.0]), summarize([3.0, 4.0]))
    assert one.estimate == 2.5 and math.isnan(one.ci_low) and not one.excludes_zero
