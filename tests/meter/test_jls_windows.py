"""A trial's energy folded over power chunks equals the house integration over the whole trace;
the stored trace's bins are the samples' means."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from analysis.energy import window_energy_mj
from controller.meter.jls.windows import EnergyFold, bin_means, fold_power, window_total

RATE = 1000.0


def _fold(power: np.ndarray, start: int, end: int, cuts: list[int], first: int = 0) -> EnergyFold:
    fold = EnergyFold.over(start, end)
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(power)), len(power)]
    for lo, hi in pairwise(bounds):
        fold = fold_power(fold, power[lo:hi], first + lo)
    return fold


powers = st.lists(st.floats(0.0, 5000.0), min_size=2, max_size=200)


@settings(max_examples=300, deadline=None)
@given(powers, st.data())
def test_folded_energy_is_the_trapezoid_over_the_window(values, data) -> None:
    power = np.array(values)
    n = len(power)
    start = data.draw(st.integers(0, n - 2))
    end = data.draw(st.integers(start, n - 1))
    cuts = data.draw(st.lists(st.integers(0, n), max_size=10))
    total = window_total(_fold(power, start, end, cuts), RATE)
    t_s = np.arange(n) / RATE
    expected, samples = window_energy_mj(t_s, power, start / RATE, end / RATE)
    assert total.energy_mj == pytest.approx(expected, rel=1e-12, abs=1e-9)
    assert total.samples == samples == end - start + 1
    assert total.samples_lost == 0
    assert total.duration_s == pytest.approx((end - start) / RATE)


@settings(max_examples=200, deadline=None)
@given(powers, st.data())
def test_lost_samples_are_bridged_from_their_neighbours_and_counted(values, data) -> None:
    power = np.array(values)
    n = len(power)
    start = data.draw(st.integers(0, n - 2))
    end = data.draw(st.integers(start + 1, n - 1))
    lost = data.draw(st.sets(st.integers(start, end), max_size=end - start))
    assume(len(lost) < end - start + 1)
    holed = power.copy()
    holed[list(lost)] = np.nan
    cuts = data.draw(st.lists(st.integers(0, n), max_size=6))
    total = window_total(_fold(holed, start, end, cuts), RATE)
    kept = np.array([i for i in range(start, end + 1) if i not in lost])
    # The reference: the valid samples only, the nearest one standing in at a lost edge.
    t = np.concatenate(([start], kept, [end])) / RATE
    p = np.concatenate(([power[kept[0]]], power[kept], [power[kept[-1]]]))
    assert total.energy_mj == pytest.approx(float(np.trapezoid(p, t)), rel=1e-12, abs=1e-9)
    assert total.samples_lost == len(lost)
    assert total.samples == len(kept)


def test_samples_the_instrument_marked_are_bridged_as_lost_ones_but_counted_saturated() -> None:
    """A NaN current beside a measured voltage (`clipped`) is the instrument's mark, not a drop:
    the same energy as if it were lost, counted apart; a NaN not marked stays lost."""
    power = np.linspace(1000.0, 2000.0, 50)
    holed = power.copy()
    holed[[10, 11, 30]] = np.nan
    clipped = np.zeros(50, dtype=bool)
    clipped[[10, 11, 40]] = True  # 40 is a number: a mark on a measured sample counts nothing
    as_lost = window_total(fold_power(EnergyFold.over(5, 45), holed, 0), RATE)
    fold = EnergyFold.over(5, 45)
    fold = fold_power(fold, holed[:20], 0, clipped[:20])
    marked = window_total(fold_power(fold, holed[20:], 20, clipped[20:]), RATE)
    assert marked.energy_mj == pytest.approx(as_lost.energy_mj, rel=1e-12)
    assert (as_lost.samples_lost, as_lost.samples_saturated) == (3, 0)
    assert (marked.samples_lost, marked.samples_saturated) == (1, 2)
    assert marked.samples == as_lost.samples == 41 - 3


def test_chunks_beyond_the_window_count_nothing() -> None:
    power = np.full(100, 2000.0)  # 2 W
    fold = fold_power(EnergyFold.over(40, 60), power[:30], 0)
    assert fold == EnergyFold.over(40, 60)
    fold = fold_power(fold, power[30:100], 30)
    total = window_total(fold_power(fold, power, 100), RATE)
    assert total.energy_mj == pytest.approx(2000.0 * 20 / RATE)  # 2 W over 20 ms: 40 mJ


def test_a_window_with_no_valid_sample_has_no_energy() -> None:
    power = np.full(10, np.nan)
    with pytest.raises(ValueError, match=r"in 2\.\.5 \(4 lost, 0 marked unmeasured\)"):
        window_total(fold_power(EnergyFold.over(2, 5), power, 0), RATE)


def test_a_window_not_read_to_its_end_has_no_energy() -> None:
    fold = fold_power(EnergyFold.over(0, 50), np.ones(20), 0)
    with pytest.raises(ValueError, match=r"samples 20\.\.50 of the window were never read"):
        window_total(fold, RATE)
    with pytest.raises(ValueError, match="chunk starts at sample 30, expected 20"):
        fold_power(fold, np.ones(20), 30)
    with pytest.raises(ValueError, match="ends at sample 3 before it starts"):
        EnergyFold.over(5, 3)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.floats(-10.0, 10.0), st.just(math.nan)), max_size=120),
    st.integers(1, 17),
    st.integers(0, 5),
)
def test_bins_are_the_means_of_their_valid_samples_at_their_centres(values, k, first_bin) -> None:
    power = np.array(values, dtype=np.float64)
    first = first_bin * k
    at, means = bin_means(power, first, k)
    expected_at, expected_means = [], []
    for b in range(0, len(power), k):
        chunk = power[b : b + k]
        valid = np.flatnonzero(np.isfinite(chunk))
        if len(valid):
            expected_at.append(first + b + valid.mean())
            expected_means.append(chunk[valid].mean())
    assert at.tolist() == pytest.approx(expected_at)
    assert means.tolist() == pytest.approx(expected_means)


def test_bins_must_start_on_a_bin() -> None:
    with pytest.raises(ValueError, match="chunk at sample 3 is not on a 10-sample bin"):
        bin_means(np.ones(10), 3, 10)
    with pytest.raises(ValueError, match="bins of 0 samples"):
        bin_means(np.ones(10), 0, 0)
