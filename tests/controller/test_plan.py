from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from controller.sweep.plan import plan_trials
from tests.controller.test_engine import windows

points_st = st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=9, unique=True).map(
    lambda sizes: windows(*sizes)
)


@given(
    points_st,
    st.integers(1, 8),
    st.sampled_from(["randomized-blocked", "sequential"]),
    st.integers(0, 2**32),
)
def test_every_point_runs_exactly_repetitions_times(points, repetitions, order, seed) -> None:
    plan = plan_trials(points, repetitions, order, seed)
    assert len(plan) == len(points) * repetitions
    counts = Counter(trial.point for trial in plan)
    assert set(counts.values()) == {repetitions}
    assert [t.index for t in plan] == list(range(len(plan)))
    assert len({t.trial_id for t in plan}) == len(plan)
    for point in counts:
        reps = sorted(t.repetition for t in plan if t.point == point)
        assert reps == list(range(1, repetitions + 1))


@given(points_st, st.integers(1, 6), st.integers(0, 2**32))
def test_randomized_blocks_hold_each_point_once_and_are_reproducible(
    points, repetitions, seed
) -> None:
    plan = plan_trials(points, repetitions, "randomized-blocked", seed)
    assert plan == plan_trials(points, repetitions, "randomized-blocked", seed)
    size = len(points)
    for block in range(repetitions):
        members = plan[block * size : (block + 1) * size]
        assert {t.block for t in members} == {block}
        assert sorted(t.point.axes for t in members) == sorted(p.axes for p in points)


def test_seed_changes_the_order_and_sequential_keeps_points_together() -> None:
    points = windows(*(2**k for k in range(8, 17)))
    a = plan_trials(points, 3, "randomized-blocked", 1)
    b = plan_trials(points, 3, "randomized-blocked", 2)
    assert [t.point for t in a] != [t.point for t in b]
    sequential = plan_trials(points, 3, "sequential", 1)
    assert [t.point.settings for t in sequential[:3]] == [(("initial_window_size", 256),)] * 3
    assert sequential[0].trial_id == "t01"
