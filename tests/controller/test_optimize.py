"""The optimizing search's rules (controller.sweep.optimize, analysis.pareto): the front, the
best, and when a point needs more repetitions, over generated points and scores."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.pareto import dominates, front, indistinct, tied
from controller.config.model import Point
from controller.sweep.optimize import (
    OptimizeSpec,
    at_floor,
    forced,
    needs_more,
    precise,
    rivals,
    summaries,
)

ONE = OptimizeSpec(("energy_mj",), budget=100, repetitions=3, max_repetitions=9)
TWO = OptimizeSpec(("energy_mj", "client_response_s"), budget=100)

score = st.floats(min_value=0, max_value=1000, allow_nan=False)


def _point(i: int) -> Point:
    return (("initial_window_size", 1024 * (i + 1)),)


def _measured(points: list[list[tuple[float, ...]]], spec: OptimizeSpec) -> dict:
    return {_point(i): summaries(scores, spec) for i, scores in enumerate(points)}


two_objective_points = st.lists(
    st.lists(st.tuples(score, score), min_size=2, max_size=5), min_size=1, max_size=8
)


@given(two_objective_points)
def test_the_front_is_what_no_point_dominates(points: list[list[tuple[float, float]]]) -> None:
    measured = _measured(points, TWO)
    on = front(measured)
    assert on  # a finite set always has a non-dominated point
    for point, own in measured.items():
        beaten = any(dominates(other, own) for p, other in measured.items() if p != point)
        assert (point in on) == (not beaten)


@given(st.lists(st.lists(st.tuples(score), min_size=2, max_size=5), min_size=1, max_size=8))
def test_with_one_objective_the_front_is_the_lowest_mean(points: list[list[tuple[float]]]) -> None:
    measured = _measured(points, ONE)
    lowest = min(s[0].mean for s in measured.values())
    assert {p for p, s in measured.items() if s[0].mean == lowest} == set(front(measured))


@given(two_objective_points, st.integers(0, 20))
def test_repetitions_bound_the_rounds(points: list[list[tuple[float, float]]], n: int) -> None:
    measured = _measured(points, TWO)
    point = _point(0)
    more = needs_more(point, measured, n, TWO)
    if n < TWO.repetitions:
        assert more
    if n >= TWO.max_repetitions:
        assert not more
        assert forced(point, measured, n, TWO) == (
            not precise(measured[point], TWO)
            and any(indistinct(measured[point], measured[r]) for r in rivals(point, measured))
        )


def test_a_point_clearly_apart_from_the_best_needs_no_more() -> None:
    measured = _measured([[(10.0,), (10.1,), (9.9,)], [(20.0,), (20.2,), (19.8,)]], ONE)
    assert not needs_more(_point(1), measured, 3, ONE)  # worse, with confidence
    assert not needs_more(_point(0), measured, 3, ONE)  # better, with confidence
    assert tied(_point(0), measured) == []


def test_a_point_whose_interval_holds_the_best_gets_another_round() -> None:
    measured = _measured([[(10.0,), (11.0,), (9.0,)], [(10.5,), (12.0,), (9.5,)]], ONE)
    assert indistinct(measured[_point(0)], measured[_point(1)])
    assert needs_more(_point(1), measured, 3, ONE)
    assert tied(_point(0), measured) == [_point(1)]
    assert forced(_point(1), measured, 9, ONE) and not needs_more(_point(1), measured, 9, ONE)


def test_a_point_measured_within_the_tolerance_is_tied_not_measured_again() -> None:
    # Overlapping the best, but each interval within 5 % of its mean: equally good.
    measured = _measured([[(10.0,), (10.1,), (9.9,)], [(10.1,), (10.2,), (10.0,)]], ONE)
    assert indistinct(measured[_point(0)], measured[_point(1)])
    assert precise(measured[_point(1)], ONE)
    assert not needs_more(_point(1), measured, 3, ONE)
    assert not forced(_point(1), measured, 9, ONE)
    # Without a tolerance only the cap stops it, and then its place is its mean's.
    strict = OptimizeSpec(("energy_mj",), budget=100, repetitions=3, max_repetitions=9, tolerance=0)
    assert needs_more(_point(1), measured, 3, strict)
    assert forced(_point(1), measured, 9, strict)


def test_a_point_within_the_meters_floor_is_decided_at_it() -> None:
    # Overlapping the best with intervals of about ±20 mJ (2 % of the mean): a 0.1 % tolerance
    # would chase them to the cap; an ACS712's floor of 66 mJ over the window says no number
    # of trials tells them apart.
    measured = _measured([[(1000.0,), (1020.0,), (980.0,)], [(1010.0,), (1030.0,), (990.0,)]], ONE)
    fine = OptimizeSpec(
        ("energy_mj",), budget=100, repetitions=3, max_repetitions=9, tolerance=0.001
    )
    assert needs_more(_point(1), measured, 3, fine)
    assert not needs_more(_point(1), measured, 3, fine, (66.0,))
    assert at_floor(measured[_point(1)], fine, (66.0,))
    assert not forced(_point(1), measured, 9, fine, (66.0,))
    # A floor narrower than the interval changes nothing; without a tolerance the floor alone
    # still decides.
    assert needs_more(_point(1), measured, 3, fine, (1.0,))
    strict = OptimizeSpec(("energy_mj",), budget=100, repetitions=3, max_repetitions=9, tolerance=0)
    assert at_floor(measured[_point(1)], strict, (66.0,))


def test_two_objectives_separate_on_either() -> None:
    # Indistinct in energy, clearly apart in response time: decided.
    measured = _measured(
        [[(10.0, 1.0), (11.0, 1.01), (9.0, 0.99)], [(10.5, 2.0), (12.0, 2.01), (9.5, 1.99)]], TWO
    )
    assert not indistinct(measured[_point(0)], measured[_point(1)])
    assert not needs_more(_point(1), measured, 3, TWO)
    assert front(measured) == [_point(0)]


def test_an_interval_not_yet_known_separates_nothing() -> None:
    measured = _measured([[(10.0,)], [(50.0,), (50.1,)]], ONE)
    assert math.isnan(measured[_point(0)][0].ci_low)
    assert indistinct(measured[_point(0)], measured[_point(1)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"objectives": ()}, "one or two objectives"),
        ({"objectives": ("a", "b", "c")}, "one or two objectives"),
        ({"repetitions": 1}, "2 <= repetitions"),
        ({"repetitions": 5, "max_repetitions": 4}, "repetitions <= max_repetitions"),
        ({"budget": 2}, "below one round"),
        ({"tolerance": 1.0}, "tolerance 1.0 must be in"),
    ],
)
def test_a_spec_that_cannot_search_is_refused(kwargs: dict, message: str) -> None:
    values = {"objectives": ("energy_mj",), "budget": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        OptimizeSpec(**values)
