"""An optimizing search's result read from its trials (analysis.optimize): the best point and the
points tied with it, the front of two objectives, and the check against a grid run's trials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.load import Run
from analysis.optimize import (
    against,
    grid_check,
    intervals,
    point_scores,
    search_facts,
)
from analysis.pareto import best, tied
from controller.meter.calibration import nominal
from controller.meter.ppk2.device import EXAMPLE_METADATA
from controller.meter_sources.board.resolution import acs712
from controller.meter_sources.ppk2.resolution import ppk2_resolution

AXES = ("initial_window_size", "window_update_policy")
SWEEP = {"initial_window_size": [4095, 65535], "window_update_policy": ["half", "every-frame"]}
# energy per point: (4095, half) is best, (65535, half) close behind, the rest far.
ENERGY = {
    (4095, "half"): 10.0,
    (65535, "half"): 10.3,
    (4095, "every-frame"): 30.0,
    (65535, "every-frame"): 20.0,
}
RESPONSE = {
    (4095, "half"): 2.0,
    (65535, "half"): 1.0,
    (4095, "every-frame"): 3.0,
    (65535, "every-frame"): 0.5,
}
SPREAD = (-0.2, 0.0, 0.2)
# The records the board's and the PPK2's taps write (manifest meter.resolution).
ACS712_RECORD = acs712(nominal(), 0, 1000, 104.0).to_dict()


def _run(
    name: str,
    points: list[tuple[int, str]],
    search: dict[str, Any] | None,
    resolution: dict[str, Any] | None = None,
) -> Run:
    rows = [
        {
            "initial_window_size": window,
            "window_update_policy": policy,
            "energy_above_idle_mj": ENERGY[(window, policy)] + wobble,
            "client_response_s": RESPONSE[(window, policy)] * (1 + wobble / 10),
            "window_s": 0.5,
            "samples": 500,
            "mean_power_mw": 1200.0,
        }
        for window, policy in points
        for wobble in SPREAD
    ]
    config: dict[str, Any] = {"run": {"confidence": 0.9, "repetitions": 3}, "sweep": SWEEP}
    if search is not None:
        config["search"] = {"kind": "optimize", "budget": 30, "sampler": "tpe", **search}
    manifest: dict[str, Any] = {"config": config, "axes": list(AXES)}
    if resolution is not None:
        manifest["meter"] = {"source": "virtual", "resolution": resolution}
    return Run(Path(name), manifest, AXES, pd.DataFrame(rows), len(rows), pd.DataFrame())


GRID = _run("grid", list(ENERGY), None)


def _search(points: list[tuple[int, str]], objectives: list[str]) -> Run:
    return _run("search", points, {"objectives": objectives})


def test_the_facts_of_a_search_and_none_for_a_grid() -> None:
    facts = search_facts(_search([(4095, "half")], ["energy_above_idle_mj"]))
    assert facts is not None and facts.grid_points == 4 and facts.grid_repetitions == 3
    assert search_facts(GRID) is None


def test_the_best_point_and_the_points_the_intervals_cannot_tell_from_it() -> None:
    run = _search(list(ENERGY), ["energy_above_idle_mj"])
    facts = search_facts(run)
    assert facts is not None
    measured = intervals(point_scores(run, facts), run.confidence)
    (lowest,) = best(measured)
    assert lowest == ("4095", "half")
    assert tied(lowest, measured) == [("65535", "half")]


def test_two_objectives_give_the_front() -> None:
    run = _search(list(ENERGY), ["energy_above_idle_mj", "client_response_s"])
    facts = search_facts(run)
    assert facts is not None
    measured = intervals(point_scores(run, facts), run.confidence)
    assert set(best(measured)) == {
        ("4095", "half"),
        ("65535", "half"),
        ("65535", "every-frame"),
    }


@pytest.mark.parametrize(
    ("measured", "verdict", "same", "within"),
    [
        ([(4095, "half"), (65535, "every-frame")], "found the grid's best point", True, True),
        ([(65535, "half"), (4095, "every-frame")], "cannot tell from its best", False, True),
        ([(65535, "every-frame"), (4095, "every-frame")], "missed the grid's best", False, False),
    ],
)
def test_the_search_is_checked_against_the_grid(
    measured: list[tuple[int, str]], verdict: str, same: bool, within: bool
) -> None:
    search = _search(measured, ["energy_above_idle_mj"])
    facts = search_facts(search)
    assert facts is not None
    check = grid_check(search, facts, GRID)
    assert check is not None
    assert check.grid_best == ("4095", "half")
    assert (check.same, check.within) == (same, within)
    assert verdict in check.verdict


def test_a_search_verdict_below_the_meters_floor_says_so() -> None:
    """The search's best (65535, every-frame) is 10 mJ from the grid's: its trials tell them
    apart, an ACS712's step over the 0.5 s window (66 mJ) cannot; a PPK2's can."""
    ppk2 = ppk2_resolution(EXAMPLE_METADATA, 5.0).to_dict()
    points = [(65535, "every-frame"), (4095, "every-frame")]
    for resolution, verdict in (
        (ACS712_RECORD, "found a point the meter cannot tell from the grid's best"),
        (ppk2, "missed the grid's best"),
    ):
        grid = _run("grid", list(ENERGY), None, resolution)
        search = _run("search", points, {"objectives": ["energy_above_idle_mj"]}, resolution)
        facts = search_facts(search)
        assert facts is not None
        check = grid_check(search, facts, grid)
        assert check is not None and check.verdict == verdict
    # The point tied with the best (0.3 mJ behind) is the meter's to tell, not the trials'.
    search = _run("search", list(ENERGY), {"objectives": ["energy_above_idle_mj"]}, ACS712_RECORD)
    facts = search_facts(search)
    assert facts is not None
    measured = intervals(point_scores(search, facts), 0.9)
    (close,) = tied(("4095", "half"), measured)
    resolvable = against(search, facts, ("4095", "half"), close, measured)
    assert resolvable.verdict == "below_meter_floor"
    # One step held over the 0.5 s window, and the sensor's noise averaged over its 500 samples.
    step_mj, noise_mj = ACS712_RECORD["power_mw"] * 0.5, ACS712_RECORD["noise_mw"] * 0.5 / 500**0.5
    assert resolvable.floor_mj == pytest.approx(step_mj + noise_mj)
