"""A local warm sweep whose client runs on uvloop, with the body check as an axis: every trial
ran on the loop the config asked for (the warm agent starts a loop per trial), each row says
so, and the report reads it. A fresh client on uvloop runs in tests/e2e/test_ssh_sweep.py. A
server on uvloop (run.server_event_loop) runs here too, over QUIC; tests/agent/test_event_loops.py
runs it over every protocol."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.conftest import h2iot, swept_ok

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "local.toml"


def test_a_warm_sweep_on_uvloop_checks_bodies_as_each_point_says(tmp_path: Path) -> None:
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", "workload.total_bytes=300000", "--set", "run.idle_baseline_s=1",
        "--set", "run.repetitions=2", "--set", 'run.event_loop="uvloop"',
        "--set", 'run.agent="warm"', "--set", 'energy.window="fetch"',
        "--set", 'sweep={initial_window_size = [4096], verify = ["sha256", "size"]}',
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["run"]["event_loop"] == "uvloop"
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and all(row["status"] == "ok" for row in rows), rows
    assert {row["client_event_loop"] for row in rows} == {"uvloop"}
    assert sorted(row["verify"] for row in rows) == ["sha256", "sha256", "size", "size"]
    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr


def test_a_sweep_runs_its_server_on_uvloop_when_the_config_asks(tmp_path: Path) -> None:
    run, rows = swept_ok(
        "local.toml", tmp_path / "runs",
        "--set", "workload.total_bytes=300000", "--set", "run.idle_baseline_s=1",
        "--set", "run.repetitions=1", "--set", 'run.server_event_loop="uvloop"',
        "--set", 'workload.protocol="h3"', "--set", 'sweep={initial_window_size = [4096]}',
    )  # fmt: skip
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["run"]["server_event_loop"] == "uvloop"
    log = (run / "nodes" / "server" / "server.log").read_text().splitlines()
    listening = [json.loads(line) for line in log if '"event": "listening"' in line]
    assert [event["event_loop"] for event in listening] == ["uvloop"]
    assert [row["client_event_loop"] for row in rows] == ["asyncio"]  # the client's own key
