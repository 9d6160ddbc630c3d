"""The breakdown search on the sweep engine, with the engine tests' in-process stand-ins for the
nodes and the meter: probes are ordinary recorded trials, breakdown.csv, pauses and resume.
tests/e2e/test_breakdown_sweep.py runs it with real agents."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from analysis.columns import BREAKDOWN
from analysis.trial_columns import header
from controller.config import load_config
from controller.config.model import Config, TrialPoint
from controller.dashboard.state import (
    DashboardEvent,
    Notice,
    SearchProgress,
    SweepState,
    apply,
)
from controller.dashboard.view import render
from controller.errors import ConfigError
from controller.run.recorder import RunRecorder, read_trials
from controller.sweep.search_run import (
    BREAKDOWN_COLUMNS,
    BreakdownRun,
    first_point,
    search_axes,
    trials_bound,
)
from tests.controller.test_engine import StandInNodes, stand_in_engine

# The blob workload's latency grows with the body: 1 ms per 100 kB here, plus the mode's cost;
# the search looks for where it exceeds 2 ms.
KNEE_BYTES = {"sequential": 200_000, "concurrent": 50_000}


def latency_s(size: int, mode: str) -> float:
    return 0.002 * size / KNEE_BYTES[mode]


class BlobNodes(StandInNodes):
    """Stand-in nodes answering with the blob workload's record, latency set by the size."""

    def __init__(self, lose_at: str | None = None, fail: frozenset[str] = frozenset()) -> None:
        super().__init__(set(), lose_at)
        self.fail = fail
        self.trials: list[str] = []

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        record = super().run_trial(trial_id, point, timeout_s)
        settings = dict(point.axes)
        self.trials.append(trial_id)
        if trial_id in self.fail:
            return {"ok": False, "error": "connection refused"}
        size, mode = int(settings["size_bytes"]), str(settings["mode"])
        # A little spread, the same for every run: the CI is finite, the verdicts certain.
        wobble = 1 + 0.01 * (int(trial_id[-2:]) % 3 - 1)
        record["metrics"] = {"latency_mean_s": latency_s(size, mode) * wobble}
        return record


def search_config(*extra: str) -> Config:
    return load_config(
        None,
        [
            'workload.kind="blob"',
            'sweep={mode = ["sequential", "concurrent"]}',
            'search.param="size_bytes"',
            "search.low=1024",
            "search.high=4194304",
            'search.metric="blob_latency_mean_s"',
            "search.threshold=0.002",
            'search.holds="at_most"',
            "search.repetitions=2",
            "search.resolution=1.5",
            *extra,
        ],
    )


def _search(run: Path, nodes: BlobNodes, config: Config, events: list[DashboardEvent]) -> Any:
    axes = search_axes(config)
    if (run / "manifest.json").exists():
        recorder, _manifest = RunRecorder.resume(run)
    else:
        manifest = {"axes": list(axes), "config": config.to_dict(), "workload": {"kind": "blob"}}
        recorder = RunRecorder.create(run, axes, manifest, "blob", search=True)
    search = BreakdownRun(stand_in_engine(recorder, nodes, events.append), config, events.append)
    try:
        return search.run(), search
    finally:
        recorder.close()


def _breakdown(run: Path) -> list[dict[str, str]]:
    with (run / BREAKDOWN).open() as handle:
        return list(csv.DictReader(handle))


def test_each_group_is_searched_with_recorded_probe_trials(tmp_path: Path) -> None:
    config = search_config()
    run = tmp_path / "run"
    events: list[DashboardEvent] = []
    outcome, search = _search(run, BlobNodes(), config, events)
    assert outcome.paused is None and not outcome.failed_trials
    assert [r.status for r in search.results] == ["found", "found"]
    rows = read_trials(run)
    assert list(rows[0]) == header(("size_bytes", "mode"), "blob", search=True)
    assert all(row["status"] == "ok" for row in rows) and outcome.completed == len(rows)
    assert len(rows) <= trials_bound(config)
    for row in rows:
        group, probe, repetition = row["search_group"], row["search_probe"], row["repetition"]
        assert row["trial_id"] == f"g{int(group):03d}p{int(probe):02d}r{int(repetition):02d}"
        assert row["mode"] == ("sequential", "concurrent")[int(group) - 1]
    # The first probes of a group: the range's ends.
    first = [r for r in rows if r["search_group"] == "1"]
    assert [int(r["size_bytes"]) for r in first[:4]] == [1024, 1024, 4194304, 4194304]

    table = _breakdown(run)
    assert list(table[0]) == ["mode", *BREAKDOWN_COLUMNS]
    for line in table:
        knee = KNEE_BYTES[line["mode"]]
        passing, failing = float(line["passing"]), float(line["failing"])
        assert passing <= knee * 1.01 and knee / 1.01 < failing and failing / passing <= 1.5
        assert passing <= float(line["breakdown"]) <= failing
        assert float(line["passing_ci_high"]) <= 0.002 < float(line["failing_ci_low"])
        assert line["status"] == "found" and line["param"] == "size_bytes"
        assert line["mb_s"] == ""  # no unit_bytes, no MB/s
        assert int(line["trials"]) == sum(1 for r in rows if r["mode"] == line["mode"])
        assert len(line["probe_values"].split()) == int(line["probes"])

    progress = [e for e in events if isinstance(e, SearchProgress)]
    assert {(e.group_index, e.groups) for e in progress} == {(1, 2), (2, 2)}
    assert progress[0].passing is None and progress[-1].passing is not None
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert "search mode=sequential: size_bytes=1024: pass, mean " in notices[0]
    logged = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    probes = [e for e in logged if e["event"] == "search_probe"]
    assert sum(int(line["probes"]) for line in table) == len(probes)


def test_a_paused_search_resumes_where_it_stopped_and_ends_the_same(tmp_path: Path) -> None:
    config = search_config()
    whole, _ = _search(tmp_path / "whole", BlobNodes(), config, [])
    expected = _breakdown(tmp_path / "whole")
    run = tmp_path / "run"
    paused, _ = _search(run, BlobNodes(lose_at="g002p02r01"), config, [])
    assert paused.paused is not None and "ssh connection reset" in paused.paused
    assert [line["mode"] for line in _breakdown(run)] == ["sequential"]  # group 1 is done
    again = BlobNodes()
    resumed, _ = _search(run, again, config, [])
    assert resumed.paused is None
    assert again.trials[0] == "g002p02r01"  # nothing done is run twice
    assert _breakdown(run) == expected
    ok = [row["trial_id"] for row in read_trials(run) if row["status"] == "ok"]
    assert len(ok) == len(set(ok)) == whole.completed


def test_a_trial_failing_every_attempt_gives_its_group_up(tmp_path: Path) -> None:
    run = tmp_path / "run"
    outcome, search = _search(run, BlobNodes(fail=frozenset({"g001p02r01"})), search_config(), [])
    assert outcome.failed_trials == ("g001p02r01",)
    assert [r.status for r in search.results] == ["failed", "found"]
    failed, found = _breakdown(run)
    assert failed["status"] == "failed" and failed["error"] == "g001p02r01 failed"
    assert failed["breakdown"] == "" and found["status"] == "found"


def test_unit_bytes_gives_the_offered_load_at_the_breakdown(tmp_path: Path) -> None:
    # relative_to a column: the latency over itself is 1, below 2: every value passes.
    config = search_config(
        'search.relative_to="blob_latency_mean_s"', "search.unit_bytes=8", "search.threshold=2"
    )
    run = tmp_path / "run"
    _search(run, BlobNodes(), config, [])
    for line in _breakdown(run):
        assert line["status"] == "above_high" and line["failing"] == ""
        assert float(line["breakdown"]) == 4194304
        mean_latency = latency_s(4194304, line["mode"])  # the group's mean reference, roughly
        assert float(line["mb_s"]) > 4194304 * 8 * 0.9 * mean_latency / 1e6 / 10


def test_the_first_point_is_the_first_groups_low_end() -> None:
    config = search_config()
    assert first_point(config).axes == (("size_bytes", 1024), ("mode", "sequential"))
    assert search_axes(config) == ("size_bytes", "mode")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('search.param="mode"', "search.param: 'mode' is not a numeric parameter"),
        ("sweep.size_bytes=[1, 2]", "sweep.size_bytes: the breakdown search sets size_bytes"),
        ("search.high=1e12", "search.high: 1000000000000 is outside 0..67108864"),
        ("search.low=1.5", "search.low: expected an integer"),
        ("search.low=8388608", "search.low: low (8.38861e+06) must be below high"),
        ('search.metric="blob_latency_p99_s"', "search.metric: 'blob_latency_p99_s' is not"),
        ("search.max_repetitions=1", "search.max_repetitions: 1 is fewer than"),
        ("search.resolution=1", "search.resolution: 1 is outside (1, 1e+06]"),
        ('search.holds="above"', 'search.holds: expected one of "at_least", "at_most"'),
        ("search.bogus=1", "search.bogus: unknown key"),
    ],
)
def test_a_search_that_cannot_run_is_refused_naming_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^--set: " + re.escape(message)):
        search_config(override)


def test_a_search_needs_its_parameter_range_and_metric() -> None:
    with pytest.raises(ConfigError, match=r"^--set: search.metric: required"):
        load_config(
            None,
            ['workload.kind="blob"', 'search.param="size_bytes"', "search.low=1", "search.high=9"],
        )


def test_the_config_records_the_search_only_when_there_is_one() -> None:
    assert "search" not in load_config(None).to_dict()
    recorded = search_config().to_dict()["search"]
    assert recorded["param"] == "size_bytes" and recorded["holds"] == "at_most"


def test_the_dashboard_shows_which_group_and_probe() -> None:
    state = SweepState()
    apply(state, SearchProgress((("mode", "concurrent"),), 2, 4, 3, "size_bytes", 65536, 1,
                                1024, None))  # fmt: skip
    console = Console(width=200, color_system=None, record=True)
    console.print(render(state))
    text = console.export_text()
    assert (
        "group 2/4 (mode=concurrent): probe 3 at size_bytes=65536, 1 trials so far; breakdown "
        "between 1024 and ?"
    ) in text


def test_under_fails_a_trial_failing_every_attempt_fails_its_probe_and_replays(
    tmp_path: Path,
) -> None:
    config = search_config('search.failed_trial="fails"')
    run = tmp_path / "run"
    # The high end of group 1 cannot finish (both attempts): its probe fails, the search goes on.
    nodes = BlobNodes(fail=frozenset({"g001p02r01"}), lose_at="g002p01r01")
    paused, search = _search(run, nodes, config, [])
    assert paused.failed_trials == ("g001p02r01",) and paused.paused is not None
    (first,) = search.results
    assert first.status == "found"
    unfinished = [p for p in first.breakdown.probes if p.unfinished]
    assert [(p.index, p.value) for p in unfinished] == [(2, 4194304.0)]
    assert _breakdown(run)[0]["unfinished_probes"] == "1"
    # Resumed: group 1's failed trial replays as its probe's failure, nothing of it runs again.
    again = BlobNodes()
    resumed, search = _search(run, again, config, [])
    assert resumed.paused is None and again.trials[0] == "g002p01r01"
    assert [r.status for r in search.results] == ["found", "found"]
    assert search.results[0].breakdown == first.breakdown
