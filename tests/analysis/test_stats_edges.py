"""The statistics at their edges: empty and single-value summaries, the sample-size formulas'
exact values and where they give up, and every field of a Welch difference."""

from __future__ import annotations

import math

import pytest

from analysis.stats import (
    Summary,
    cochran_sample_size,
    repetitions_for_relative_half_width,
    summarize,
    t_quantile,
    welch_difference,
)


def test_an_empty_summary_is_all_nan_but_keeps_its_confidence():
    empty = summarize([], confidence=0.95)
    assert empty.n == 0
    assert all(
        math.isnan(v) for v in (empty.mean, empty.sd, empty.median, empty.ci_low, empty.ci_high)
    )
    assert empty.confidence == 0.95


def test_one_value_has_a_mean_and_median_but_no_spread_or_interval():
    one = summarize([4.0], confidence=0.8)
    assert (one.n, one.mean, one.median, one.confidence) == (1, 4.0, 4.0, 0.8)
    assert math.isnan(one.sd) and math.isnan(one.ci_low) and math.isnan(one.ci_high)


def test_integers_summarise_like_floats():
    assert summarize([1, 2, 4]) == summarize([1.0, 2.0, 4.0])


def test_cochran_gives_the_studys_68_by_default_and_97_at_95_percent():
    assert cochran_sample_size() == 68
    assert cochran_sample_size(0.95) == 97  # 1.96^2 x 0.25 / 0.01 = 96.04
    assert cochran_sample_size(0.90, margin=0.05) == 271


def _pilot(n: int, mean: float, sd: float) -> Summary:
    return Summary(n, mean, sd, mean, math.nan, math.nan, 0.90)


def test_repetitions_for_a_relative_half_width_exactly():
    # (1.645 x 20 / (0.05 x 100))^2 = 43.3 -> 44
    assert repetitions_for_relative_half_width(_pilot(5, 100.0, 20.0), 0.05) == 44
    assert repetitions_for_relative_half_width(_pilot(5, -100.0, 20.0), 0.05) == 44
    assert repetitions_for_relative_half_width(_pilot(2, 1.0, 0.2), 0.1) == 11  # 10.8 -> 11
    # A pilot already tight enough still needs two values for any interval at all.
    assert repetitions_for_relative_half_width(_pilot(3, 100.0, 0.1), 0.05) == 2


@pytest.mark.parametrize(
    "pilot",
    [_pilot(1, 10.0, 0.5), _pilot(0, 10.0, 0.5), _pilot(5, 0.0, 1.0), _pilot(5, 10.0, math.nan)],
)
def test_repetitions_are_unknown_without_two_values_a_mean_or_a_spread(pilot: Summary):
    assert repetitions_for_relative_half_width(pilot, 0.05) is None


def test_welch_without_two_values_on_a_side_is_an_estimate_only():
    diff = welch_difference(summarize([1.0]), summarize([2.0, 3.0]), confidence=0.8)
    assert diff.estimate == 1.5
    assert math.isnan(diff.ci_low) and math.isnan(diff.ci_high) and math.isnan(diff.df)
    assert diff.confidence == 0.8
    assert not diff.excludes_zero


def test_welch_without_spread_collapses_to_the_estimate():
    diff = welch_difference(summarize([1.0, 1.0]), summarize([3.0, 3.0]), confidence=0.8)
    assert (diff.estimate, diff.ci_low, diff.ci_high, diff.df) == (2.0, 2.0, 2.0, math.inf)
    assert diff.confidence == 0.8
    assert diff.excludes_zero


def test_welch_keeps_its_confidence():
    diff = welch_difference(summarize([1.0, 2.0, 3.0]), summarize([2.0, 4.0]), confidence=0.8)
    assert diff.confidence == 0.8
    assert diff.ci_low < diff.estimate < diff.ci_high


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.1])
def test_a_confidence_outside_zero_to_one_is_refused_by_name(confidence: float):
    with pytest.raises(ValueError) as caught:
        t_quantile(confidence, 5)
    assert str(caught.value) == f"confidence {confidence} must be between 0 and 1"
