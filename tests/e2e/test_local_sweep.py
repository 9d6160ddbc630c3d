"""End to end on local nodes with the virtual meter: `h2iot sweep` as a researcher runs it.

Every planned trial gets a row, energies match the virtual meter's ground truth, the run folder
is in the documented format, and a run survives SIGKILL of the controller, a dead server agent
and an unplugged meter."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from analysis.columns import FORMAT_VERSION
from analysis.trial_columns import header
from controller.energy import energy_in_window
from controller.meter.truth import Truth
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from tests.e2e.floor_report import assert_floor_reported

H2IOT = [sys.executable, "-m", "controller.cli"]
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local.toml"
SMALL = [
    "--set", "workload.total_bytes=600000",
    "--set", "run.idle_baseline_s=1",
    "--set", "sweep.initial_window_size=[1024, 65535]",
]  # fmt: skip


def _sweep(out: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*H2IOT, "sweep", str(CONFIG), "--no-dashboard", "--out", str(out), *SMALL, *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


def _run_dir(out: Path) -> Path:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def test_local_sweep_records_every_trial_with_energy_matching_the_ground_truth(
    tmp_path: Path,
) -> None:
    result = _sweep(tmp_path, "--set", "run.repetitions=3")
    assert result.returncode == 0, result.stdout + result.stderr
    run = _run_dir(tmp_path)
    rows = _rows(run)
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    assert sorted(r["trial_id"] for r in rows) == [f"t{i}" for i in range(1, 7)]
    assert (run / "trials.csv").read_text().splitlines()[0].split(",") == header(
        ("initial_window_size",)
    )
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["config"]["run"]["repetitions"] == 3
    assert {"nodes", "meter", "software", "idle_baseline_mw"} <= set(manifest)
    # Local nodes read one clock: the server's times map onto the client's unchanged, exactly.
    assert manifest["nodes"]["peer_clock"] == {"offset_ns": 0, "uncertainty_ns": 0}
    assert 1000 < manifest["idle_baseline_mw"] < 1500  # a Pi 3B idles near 1.2 W
    # The best TCP handshake of the run against its quickest page fetch, which takes a
    # handshake and at least two request round trips of its own.
    quickest_fetch_s = min(float(row["client_response_s"]) for row in rows)
    assert 0 < manifest["rtt_s"] < quickest_fetch_s / 2
    rate = manifest["meter"]["sample_rate_hz"]
    truth = Truth.load(run / "meter-truth.csv").per_sample(0)
    measured_total = exact_total = 0.0
    for row in rows:
        assert row["window_source"] == "marker"
        assert int(row["samples_lost"]) == int(row["samples_saturated"]) == 0
        start = float(row["window_start_s"])
        end = start + float(row["window_s"])
        indices = np.arange(len(truth))
        exact = energy_in_window(indices / rate, truth, start, end).energy_mj
        measured_total += float(row["energy_mj"])
        exact_total += exact
        # A 10-bit ACS712 reading is one LSB per 132 mW: a trial needs a few hundred samples
        # before its sensor noise averages out below 2 %.
        if float(row["window_s"]) > 0.5:
            assert float(row["energy_mj"]) == pytest.approx(exact, rel=0.02), row["trial_id"]
        trace = np.load(run / "power" / f"{row['trial_id']}.npy")
        assert trace.shape[1] == 2 and trace.shape[0] >= int(row["samples"])
        assert float(row["client_response_s"]) > 0 and float(row["server_cpu_s"]) > 0
        # The agents announce the point's settings as asked; HPACK's table is its default.
        assert (row["settings_mismatch"], row["settings_mismatches"]) == ("0", "")
        assert row["client_header_table_bytes"] == row["server_header_table_bytes"] == "4096"
    assert measured_total == pytest.approx(exact_total, rel=0.02)
    logged = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    events = [e["event"] for e in logged]
    assert events.count("trial_started") == 6
    in_force = [e for e in logged if e["event"] == "settings_in_force"]
    assert len(in_force) == 6
    for event in in_force:
        window = event["announced"]["SETTINGS_INITIAL_WINDOW_SIZE"]
        assert (
            window in (1024, 65535) and event["received"]["SETTINGS_INITIAL_WINDOW_SIZE"] == window
        )
    by_window: dict[str, list[float]] = {}
    for row in rows:
        by_window.setdefault(row["initial_window_size"], []).append(float(row["client_response_s"]))
    # The study's effect, in shape: a small window takes longer.
    assert np.mean(by_window["1024"]) > np.mean(by_window["65535"])
    assert f"report: h2iot report {run}" in result.stdout
    report = subprocess.run(
        [*H2IOT, "report", str(run)], capture_output=True, text=True, timeout=300, check=False
    )
    assert report.returncode == 0, report.stdout + report.stderr
    assert_floor_reported(run / "report")  # the board's ACS712, one 132 mW step


def _start_sweep(out: Path, *sets: str) -> subprocess.Popen[str]:
    command = [*H2IOT, "sweep", str(CONFIG), "--no-dashboard", "--out", str(out), *SMALL]
    for setting in sets:
        command += ["--set", setting]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _wait_for_rows(out: Path, controller: subprocess.Popen[str], rows: int) -> Path:
    """The run directory, once the running sweep has written `rows` rows."""
    deadline = time.monotonic() + 120
    while True:
        runs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
        if runs and (runs[0] / "trials.csv").exists() and len(_rows(runs[0])) >= rows:
            return runs[0]
        assert controller.poll() is None, "the sweep ended early"
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.05)


def test_sigkill_then_resume_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    controller = _start_sweep(tmp_path, "run.repetitions=4")
    run = _wait_for_rows(tmp_path, controller, 3)
    os.kill(controller.pid, signal.SIGKILL)
    controller.communicate()
    before = _rows(run)
    resumed = _sweep(tmp_path, "--set", "run.repetitions=4", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _rows(run)
    assert after[: len(before)] == before  # completed rows are never rewritten
    ok = [r["trial_id"] for r in after if r["status"] == "ok"]
    assert sorted(ok) == sorted(f"t{i}" for i in range(1, 9))
    assert len(ok) == len(set(ok))
    events = [json.loads(x)["event"] for x in (run / "events.jsonl").read_text().splitlines()]
    assert "sweep_resumed" in events


def test_resume_with_a_different_plan_is_refused(tmp_path: Path) -> None:
    first = _sweep(tmp_path, "--set", "run.repetitions=1")
    assert first.returncode == 0, first.stderr
    run = _run_dir(tmp_path)
    again = _sweep(tmp_path, "--set", "run.repetitions=2", "--resume", str(run))
    assert again.returncode == 2
    assert again.stderr.strip() == (
        f"h2iot: error: {run}: run.repetitions was 1 in this run, the config says 2: "
        "a resumed run keeps its plan"
    )


def test_a_killed_server_agent_fails_one_attempt_and_the_retry_carries_on(tmp_path: Path) -> None:
    controller = _start_sweep(tmp_path, "run.repetitions=3", "sweep.initial_window_size=[256]")
    run = _wait_for_rows(tmp_path, controller, 1)
    pidfile = run / "nodes" / "server" / "server.pid"
    os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    stdout, stderr = controller.communicate(timeout=300)
    assert controller.returncode == 0, stdout + stderr
    rows = _rows(run)
    assert sum(r["status"] == "ok" for r in rows) == 3
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) <= 1  # the kill may land between two trials
    assert all(r["error"] for r in failed)


def test_unplugged_meter_pauses_the_sweep_resumably(tmp_path: Path) -> None:
    board = VirtualMeter(VirtualMeterOptions())
    board.start()
    controller = _start_sweep(
        tmp_path, "run.repetitions=20", "meter.source=serial", f"meter.port={board.port}"
    )
    run = _wait_for_rows(tmp_path, controller, 2)
    board.stop()
    board.close()  # the board is gone: its pty closes under the reader
    stdout, stderr = controller.communicate(timeout=120)
    assert controller.returncode == 3, stdout + stderr
    assert "paused: MeterLost" in stdout
    assert f"--resume {run}" in stdout
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "sweep_paused"
    assert all(r["status"] in ("ok", "failed") for r in _rows(run))
