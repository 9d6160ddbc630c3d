from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.stats import summarize
from analysis.stopping import settled, should_stop


def test_stops_once_the_interval_is_narrow_enough() -> None:
    tight = [10.0, 10.1, 9.9, 10.0, 10.05]
    assert should_stop(tight, 0.90, 0.05, min_n=5)
    assert not should_stop(tight, 0.90, 0.001, min_n=5)  # target too tight
    assert not should_stop(tight, 0.90, 0.05, min_n=6)  # not enough values yet


def test_never_stops_before_two_values_and_ignores_nan() -> None:
    assert not should_stop([10.0], 0.90, 0.5, min_n=0)
    assert not should_stop([10.0, math.nan], 0.90, 0.5, min_n=1)
    assert should_stop([10.0, 10.0, math.nan], 0.90, 0.05, min_n=2)  # zero variance


def test_a_zero_mean_stops_only_with_zero_spread() -> None:
    assert should_stop([0.0, 0.0, 0.0], 0.90, 0.05, min_n=3)
    assert not should_stop([-1.0, 1.0, 0.0], 0.90, 0.05, min_n=3)


def test_rejects_a_non_positive_target() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        should_stop([1.0, 2.0], 0.90, 0.0, min_n=2)


@given(
    st.lists(st.floats(0.1, 100.0), min_size=2, max_size=40),
    st.sampled_from([0.8, 0.9, 0.95]),
    st.floats(0.001, 0.5),
)
def test_agrees_with_the_interval_it_promises(values, confidence, target) -> None:
    summary = summarize(values, confidence)
    expected = summary.half_width <= target * abs(summary.mean)
    assert should_stop(values, confidence, target, min_n=2) == expected


def test_the_meters_floor_widens_the_target_and_says_it_set_the_width() -> None:
    spread = [1000.0, 1040.0, 980.0, 1020.0]  # half-width about 30 at 90 %
    assert settled(spread, 0.90, 0.001, min_n=4) is None
    point = settled(spread, 0.90, 0.001, min_n=4, floor=66.0)
    assert point is not None and point.by_floor
    assert point.target_half_width == pytest.approx(1.01) and point.floor == 66.0
    wide = settled(spread, 0.90, 0.05, min_n=4, floor=1.0)  # the target alone stops it
    assert wide is not None and not wide.by_floor
    assert should_stop(spread, 0.90, 0.001, min_n=4, floor=66.0)
    with pytest.raises(ValueError, match="must be >= 0"):
        settled(spread, 0.90, 0.05, min_n=4, floor=-1.0)
