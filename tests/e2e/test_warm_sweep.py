"""`[run] agent = "warm"` end to end on local nodes with the virtual meter: one client agent for
the sweep, a killed one replaced with its attempt failed and retried, and the report comparing
a warm run with a fresh one of the same points (the trial process's CPU, with CIs)."""

from __future__ import annotations

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_local_sweep import SMALL, _rows, _run_dir

pytestmark = pytest.mark.slow

H2IOT = [sys.executable, "-m", "controller.cli"]
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local.toml"


def _start(out: Path, agent: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*H2IOT, "sweep", str(CONFIG), "--no-dashboard", "--out", str(out), *SMALL,
         "--set", f"run.agent={agent}", "--set", "run.repetitions=3",
         "--set", "energy.idle_end=false", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _warm_pid(out: Path, deadline_s: float = 120) -> tuple[int, Path]:
    """The warm agent's pid once the run has two rows (so it has served a trial)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        runs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
        if runs:
            pidfile = runs[0] / "nodes" / "client" / "warm.pid"
            trials = runs[0] / "trials.csv"
            if pidfile.exists() and trials.exists() and len(trials.read_text().splitlines()) >= 3:
                return int(pidfile.read_text().split()[0]), runs[0]
        time.sleep(0.05)
    raise AssertionError("the warm sweep served no two trials")


def test_a_killed_warm_agent_fails_one_attempt_and_the_sweep_completes(tmp_path: Path) -> None:
    sweep = _start(tmp_path / "warm", "warm")
    first, run = _warm_pid(tmp_path / "warm")
    os.kill(first, signal.SIGKILL)
    stdout, stderr = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, stdout + stderr
    rows = _rows(run)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 6  # 2 windows x 3 repetitions, each planned trial ok in the end
    # One process for many trials counts each trial's kernel work (agent.kernel_counters).
    for row in ok:
        assert int(row["client_voluntary_ctx_switches"]) > 0, row
        assert int(row["client_tcp_segments_in"]) > 0, row
    # The trial the kill hit (if it was mid-trial) failed naming the agent, and was retried;
    # a kill between trials shows at the next trial's start the same way.
    failed = [r for r in rows if r["status"] != "ok"]
    assert len(failed) <= 1
    for row in failed:
        assert "warm agent ended during" in row["error"], row["error"]
        assert any(r["trial_id"] == row["trial_id"] for r in ok)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["run"]["agent"] == "warm"
    pid = int((run / "nodes" / "client" / "warm.pid").read_text().split()[0])
    assert pid != first
    assert not _alive(pid)  # the sweep's end ended its agent
    # The token it printed for the controller is not left in the run folder.
    assert not (run / "nodes" / "client" / "warm-ready.json").exists()


def _server_events(run: Path) -> list[str]:
    """The events the run's last local server agent logged (each start writes a new log)."""
    lines = (run / "nodes" / "server" / "server.log").read_text().splitlines()
    return [json.loads(line)["event"] for line in lines if line.startswith('{"event"')]


def test_the_report_compares_warm_and_fresh_trial_processes_with_cis(tmp_path: Path) -> None:
    runs = {}
    for agent in ("fresh", "warm"):
        sweep = _start(tmp_path / agent, agent)
        stdout, stderr = sweep.communicate(timeout=300)
        assert sweep.returncode == 0, stdout + stderr
        runs[agent] = _run_dir(tmp_path / agent)
        assert all(r["status"] == "ok" for r in _rows(runs[agent]))
    cpu = {
        agent: statistics.median(float(r["client_process_cpu_s"]) for r in _rows(run))
        for agent, run in runs.items()
    }
    print(f"client trial process CPU, median: fresh {cpu['fresh']:.3f} s, warm {cpu['warm']:.3f} s")
    assert cpu["warm"] < cpu["fresh"]  # the interpreter's start-up and imports, once per sweep
    # The warm sweep's server took each new window's SETTINGS in its one process; the fresh
    # sweep started a server per setting, as the study ran nghttpd.
    events = {agent: _server_events(run) for agent, run in runs.items()}
    assert events["warm"].count("listening") == 1 and events["warm"].count("settings") >= 1
    assert "settings" not in events["fresh"]
    report = subprocess.run(
        [*H2IOT, "report", str(runs["warm"]), str(runs["fresh"])],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stdout + report.stderr
    (compare,) = (runs["warm"] / "report").glob("compare-*")
    markdown = (compare / "report.md").read_text()
    assert "| config.run.agent | warm | fresh |" in markdown
    with (compare / "comparison.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["metric"] == "client_process_cpu_s"]
    assert len(rows) == 2  # a row per window, with the difference's interval
    for row in rows:
        assert float(row["difference_ci_low"]) <= float(row["difference"])
        assert float(row["difference"]) <= float(row["difference_ci_high"])
        assert float(row["mean_base"]) < float(row["mean_other"])  # warm below fresh
    # The run's own report states the trial process's cost per point too.
    own = (runs["warm"] / "report" / "report.md").read_text()
    assert "client trial process CPU time" in own
