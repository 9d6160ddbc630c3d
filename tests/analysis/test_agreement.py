"""The truth check's booking intervals (analysis.agreement.booked_span): a process window's truth
is taken over the whole booking intervals around its ends, so a meter whose readings came late
(a busy machine) books no part of the process outside what is integrated."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from analysis.agreement import Model, booked_span
from analysis.energy import window_energy_mj

RATE_HZ = 1000.0


def _runs(lengths: list[int], powers: list[float]) -> np.ndarray:
    return np.concatenate([np.full(n, p) for n, p in zip(lengths, powers, strict=False)])


@st.composite
def truths(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    """A truth of runs at one power each, neighbours differing (as a meter's bookings do,
    but for two readings that found exactly the same work), and the runs' first indices."""
    lengths = draw(st.lists(st.integers(1, 40), min_size=1, max_size=12))
    powers = [draw(st.floats(1200.0, 9000.0, allow_nan=False))]
    for _ in lengths[1:]:
        powers.append(draw(st.floats(1200.0, 9000.0).filter(lambda p: p != powers[-1])))
    starts = [int(s) for s in np.cumsum([0, *lengths[:-1]])]
    return _runs(lengths, powers), starts


@given(data=st.data(), truth_and_starts=truths())
def test_the_span_grows_to_the_runs_its_ends_fall_in(
    data: st.DataObject, truth_and_starts: tuple[np.ndarray, list[int]]
) -> None:
    truth, starts = truth_and_starts
    first = data.draw(st.integers(0, len(truth) - 1))
    end = data.draw(st.integers(first, len(truth) - 1))
    lo, hi = booked_span(truth, first, end)
    run_of = np.searchsorted(starts, np.arange(len(truth)), side="right") - 1
    assert lo == starts[run_of[first]]
    assert hi == len(truth) - 1 or run_of[hi + 1] != run_of[end]
    assert run_of[hi] == run_of[end]


def test_a_span_stops_at_an_unknown_sample() -> None:
    truth = np.array([5.0, 5.0, np.nan, 5.0, 5.0, 5.0, np.nan, 5.0])
    assert booked_span(truth, 4, 4) == (3, 5)


def test_a_process_started_inside_a_late_reading_is_booked_whole_inside_its_span() -> None:
    """A node idle until its trial process starts at 1.0 s and busy on one of four cores
    until it ends at 1.2 s; the meter's readings came at 0.9 s, then (its thread late) 1.1 s,
    1.2 s and 1.3 s. The booking between 0.9 and 1.1 s spreads the process's first 0.1 s over
    0.2 s: over the process's own window the truth lacks half of it; over the whole booking
    intervals around it the truth is the model's, exactly."""
    model = Model()
    busy_mw = model.idle_mw + (model.full_mw - model.idle_mw) / model.cores
    readings_s = [0.0, 0.9, 1.1, 1.2, 1.3, 2.0]
    shares = [0.0, 0.5, 1.0, 0.0, 0.0]  # of one core, over each interval between readings
    truth = np.concatenate(
        [
            np.full(round((b - a) * RATE_HZ), model.idle_mw + (busy_mw - model.idle_mw) * share)
            for a, b, share in zip(readings_s, readings_s[1:], shares, strict=False)
        ]
    )
    t_s = np.arange(len(truth)) / RATE_HZ
    expected_mj = model.energy_above_idle_mj(0.2, 0.0)

    def above_idle_mj(first: int, end: int) -> float:
        energy, _ = window_energy_mj(t_s, truth, first / RATE_HZ, end / RATE_HZ)
        return energy - model.idle_mw * (end - first) / RATE_HZ

    assert above_idle_mj(1000, 1200) / expected_mj < 0.8
    first, end = booked_span(truth, 1000, 1200)
    assert (first, end) == (900, 1999)  # the idle run after it goes with it
    assert abs(above_idle_mj(first, end) / expected_mj - 1) < 0.01
