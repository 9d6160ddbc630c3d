"""The optimizing search on the sweep engine, with the engine tests' in-process stand-ins for the
nodes and the meter over a known landscape: it finds the landscape's best (or front) within its
budget, records its trace, pauses and resumes to the same end, and gives a failed point up.
tests/e2e/test_optimize_sweep.py runs it with real agents."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from analysis.columns import OPTIMIZE
from controller.config import load_config
from controller.config.model import Config, TrialPoint
from controller.dashboard.state import DashboardEvent, OptimizeProgress, SweepState, apply
from controller.dashboard.view import render
from controller.errors import ConfigError
from controller.run.recorder import RunRecorder, read_trials
from controller.sweep.engine import SweepEngine
from controller.sweep.optimize_run import OptimizeRun, grid_trials
from tests.controller.test_engine import (
    ACS712_RECORD,
    IDLE_MW,
    AlternatingMeter,
    StandInNodes,
    stand_in_engine,
)

WINDOWS = (1024, 4096, 16384, 65535)
POLICIES = ("half", "every-frame", "exhausted")
# Response time by window and policy: best at 16384 with "half" (0.8 s); 65535 with "exhausted"
# answers fastest but costs the most CPU (the two-objective test's other end of the front).
BASE_S = {1024: 3.0, 4096: 1.6, 16384: 1.0, 65535: 1.1}
POLICY_FACTOR = {"half": 0.8, "every-frame": 1.2, "exhausted": 1.0}


def response_s(window: int, policy: str) -> float:
    if (window, policy) == (65535, "exhausted"):
        return 0.5
    return BASE_S[window] * POLICY_FACTOR[policy]


def cpu_s(window: int, policy: str) -> float:
    return 0.9 if (window, policy) == (65535, "exhausted") else 0.1


class Landscape(StandInNodes):
    """Stand-in nodes whose response time and CPU follow the landscape, with a little spread."""

    def __init__(self, lose_at: str | None = None, fail_at: frozenset[int] = frozenset()) -> None:
        super().__init__(set(), lose_at)
        self.fail_at = fail_at  # windows whose trials fail every attempt
        self.trials: list[str] = []

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        record = super().run_trial(trial_id, point, timeout_s)
        settings = dict(point.axes)
        self.trials.append(trial_id)
        window, policy = int(settings["initial_window_size"]), str(settings["window_update_policy"])
        if window in self.fail_at:
            return {"ok": False, "error": "connection refused"}
        wobble = 1 + 0.02 * (int(trial_id[-2:]) % 3 - 1)
        record["response_s"] = response_s(window, policy) * wobble
        record["cpu_s"] = cpu_s(window, policy) * wobble
        return record


def optimize_config(*extra: str) -> Config:
    return load_config(
        None,
        [
            f"sweep.initial_window_size={list(WINDOWS)}",
            f"sweep.window_update_policy={json.dumps(list(POLICIES))}",
            'search.kind="optimize"',
            'search.objectives=["client_response_s"]',
            "search.budget=40",
            "search.repetitions=2",
            "search.max_repetitions=4",
            *extra,
        ],
    )


def _search(
    run: Path, nodes: Landscape, config: Config, events: list[DashboardEvent]
) -> tuple[Any, OptimizeRun]:
    axes = tuple(config.sweep.names)
    if (run / "manifest.json").exists():
        recorder, _manifest = RunRecorder.resume(run)
    else:
        manifest = {"axes": list(axes), "config": config.to_dict(), "workload": {"kind": "page"}}
        recorder = RunRecorder.create(run, axes, manifest, "page", search=True)
    search = OptimizeRun(stand_in_engine(recorder, nodes, events.append), config, events.append)
    try:
        return search.run(), search
    finally:
        recorder.close()


def _trace(run: Path) -> list[dict[str, str]]:
    with (run / OPTIMIZE).open() as handle:
        return list(csv.DictReader(handle))


def _events(run: Path, kind: str) -> list[dict[str, Any]]:
    logged = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    return [event for event in logged if event["event"] == kind]


def test_the_search_finds_the_best_point_within_its_budget(tmp_path: Path) -> None:
    config = optimize_config()
    run = tmp_path / "run"
    events: list[DashboardEvent] = []
    outcome, _ = _search(run, Landscape(), config, events)
    assert outcome.paused is None and not outcome.failed_trials
    rows = read_trials(run)
    assert 0 < len(rows) <= 40 < grid_trials(config) * 2
    trace = _trace(run)
    assert [int(line["proposal"]) for line in trace] == list(range(1, len(trace) + 1))
    assert int(trace[-1]["trials_used"]) == len(rows) == outcome.completed
    assert sum(int(line["trials_added"]) for line in trace) == len(rows)
    # Each trial's id names its proposal and its repetition at the point.
    for row in rows:
        assert row["search_group"] == "1"
        proposal = trace[int(row["search_probe"]) - 1]
        assert row["initial_window_size"] == proposal["initial_window_size"]
        assert (
            row["trial_id"] == f"g001p{int(row['search_probe']):02d}r{int(row['repetition']):02d}"
        )
    assert trace[-1]["best"] == "initial_window_size=65535, window_update_policy=exhausted"
    done = _events(run, "search_done")
    assert done[0]["reason"] in ("budget", "exhausted", "converged")
    assert done[0]["best"] == [{"initial_window_size": 65535, "window_update_policy": "exhausted"}]
    assert len(_events(run, "search_candidate")) == len(trace)
    # Known points cost nothing; measured ones at least a round each.
    for line in trace:
        added = int(line["trials_added"])
        assert added == 0 if line["status"] == "known" else added >= 1

    progress = [e for e in events if isinstance(e, OptimizeProgress)]
    assert progress[-1].trials_used == len(rows) and progress[-1].budget == 40
    state = SweepState(total_trials=40)
    for event in events:
        apply(state, event)
    console = Console(width=160, record=True)
    console.print(render(state))
    assert "of 40 trials; best initial_window_size=65535" in console.export_text()


def test_two_objectives_find_the_front(tmp_path: Path) -> None:
    config = optimize_config(
        'search.objectives=["client_response_s", "client_cpu_s"]', 'search.sampler="nsga2"',
        "search.budget=60",
    )  # fmt: skip
    run = tmp_path / "run"
    _search(run, Landscape(), config, [])
    best = _events(run, "search_done")[0]["best"]
    # The landscape's front: the fastest point (CPU-hungry) and the frugal one next fastest.
    assert {(p["initial_window_size"], p["window_update_policy"]) for p in best} == {
        (65535, "exhausted"),
        (16384, "half"),
    }


def test_a_paused_search_resumes_where_it_stopped_and_ends_the_same(tmp_path: Path) -> None:
    config = optimize_config()
    _search(tmp_path / "whole", Landscape(), config, [])
    expected = _trace(tmp_path / "whole")
    stop_at = read_trials(tmp_path / "whole")[9]["trial_id"]
    run = tmp_path / "run"
    paused, _ = _search(run, Landscape(lose_at=stop_at), config, [])
    assert paused.paused is not None and "ssh connection reset" in paused.paused
    again = Landscape()
    resumed, _ = _search(run, again, config, [])
    assert resumed.paused is None
    assert again.trials[0] == stop_at  # nothing done is run twice
    assert _trace(run) == expected
    ok = [row["trial_id"] for row in read_trials(run) if row["status"] == "ok"]
    assert len(ok) == len(set(ok))


def test_a_point_whose_trials_fail_is_given_up_and_never_run_again(tmp_path: Path) -> None:
    run = tmp_path / "run"
    nodes = Landscape(fail_at=frozenset({1024}))
    outcome, _ = _search(run, nodes, optimize_config(), [])
    failed = [line for line in _trace(run) if line["status"] == "failed"]
    assert outcome.failed_trials and len(outcome.failed_trials) == len(failed)
    tried = {(line["initial_window_size"], line["window_update_policy"]) for line in failed}
    assert all(window == "1024" for window, _policy in tried)
    # A failed point proposed again is skipped: each failed point's trial ran its attempts once.
    failing_ids = {t for t in nodes.trials if t in outcome.failed_trials}
    assert len(failing_ids) == len(tried)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (['search.param="size_bytes"'], "search.param: not a key of an optimizing search"),
        (["search.budget=none"], "search.budget"),
        (['search.objectives=["energy_mj", "energy_mj"]'], "names one column twice"),
        (['search.objectives=["joules"]'], "search.objectives: 'joules' is not a trials.csv"),
        (["search.repetitions=1"], "at least 2, for an interval per point"),
        (
            ["search.budget=2", "search.repetitions=3"],
            "search.budget: 2 trials is less than one round at a point",
        ),
        (
            ["sweep.initial_window_size=[4096]", 'sweep.window_update_policy=["half"]'],
            "no axis has more than one",
        ),
    ],
)
def test_a_search_that_cannot_run_is_refused_in_one_line(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        optimize_config(*overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_search_config_and_its_grid_share_one_space() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    search = load_config(root / "optimize.toml")
    grid = load_config(root / "optimize-grid.toml")
    assert search.sweep == grid.sweep and len(search.sweep.names) >= 3
    assert search.workload == grid.workload
    assert grid.search is None and search.search is not None
    assert search.search.budget < grid_trials(grid)  # type: ignore[union-attr]


@pytest.mark.parametrize("resolution", [None, ACS712_RECORD])
def test_the_search_never_chases_an_energy_interval_below_the_meters_floor(
    tmp_path: Path, resolution: dict[str, Any] | None
) -> None:
    """Energy 1000 ± 20 mJ at every point: a 0.1 % tolerance is out of reach, so every point
    overlapping the best runs to max_repetitions; with an ACS712's floor (66 mJ over the 0.5 s
    window) a point within it is decided there, and optimize.csv says so."""
    config = optimize_config(
        'search.objectives=["energy_mj"]', "search.tolerance=0.001", "search.max_repetitions=8",
        "search.budget=200",
    )  # fmt: skip
    axes = tuple(config.sweep.names)
    manifest = {"axes": list(axes), "config": config.to_dict(), "workload": {"kind": "page"}}
    recorder = RunRecorder.create(tmp_path / "run", axes, manifest, "page", search=True)
    notices: list[str] = []
    engine = SweepEngine(
        recorder=recorder, nodes=Landscape(), meter=AlternatingMeter(), idle_mw=IDLE_MW,
        retries=1, trial_timeout_s=10, post=lambda e: None, meter_resolution=resolution,
    )  # fmt: skip
    try:
        OptimizeRun(engine, config, lambda e: notices.append(getattr(e, "text", ""))).run()
    finally:
        recorder.close()
    trace = _trace(tmp_path / "run")
    floored = {line["initial_window_size"] + line["window_update_policy"]
               for line in trace if line["at_floor"] == "True"}  # fmt: skip
    most = max(int(line["n"]) for line in trace)
    if resolution is None:
        assert not floored and most == 8
        return
    assert floored and most < 8
    assert any("decided at the meter's floor" in text for text in notices)
