"""A real `h2iot sweep` (local nodes, virtual meter) killed, interrupted, starved of disk, or
fed a config that would hang: nothing of it outlives it, no run folder is left unusable, and
every fault ends in one line with the documented exit status (issue 13, items 5 to 9, 13, 14).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from tests._disk import fill, tmpfs
from tests._processes import gone, survivors
from tests.conftest import require_tool

H2IOT = [sys.executable, "-m", "controller.cli"]
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local.toml"
SMALL = (
    "workload.total_bytes=600000",
    "run.idle_baseline_s=1",
    "sweep.initial_window_size=[1024, 65535]",
)
EXIT_PAUSED = 3
EXIT_DISK_FULL = 4


def _free_port() -> int:
    """A port for the server agent, so parallel runs of the suite do not share 8443."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _sets(*extra: str) -> list[str]:
    sets = [*SMALL, f"nodes.server.http_port={_free_port()}", *extra]
    return [arg for setting in sets for arg in ("--set", setting)]


def _start(out: Path, *extra: str, config: Path = CONFIG) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*H2IOT, "sweep", str(config), "--no-dashboard", "--out", str(out), *_sets(*extra)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a signal for the controller reaches nothing else
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _h2iot(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*H2IOT, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


def _run_dir(out: Path) -> Path | None:
    runs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
    return runs[0] if runs else None


def _wait_for_rows(out: Path, controller: subprocess.Popen[str], rows: int) -> Path:
    deadline = time.monotonic() + 120
    while True:
        run = _run_dir(out)
        if run is not None and (run / "trials.csv").exists() and len(_rows(run)) >= rows:
            return run
        assert controller.poll() is None, "the sweep ended early: " + _output(controller)
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.02)


def _output(controller: subprocess.Popen[str]) -> str:
    with contextlib.suppress(subprocess.TimeoutExpired):
        stdout, stderr = controller.communicate(timeout=5)
        return stdout + stderr
    return ""


def _tree(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _name(process: psutil.Process) -> str:
    """Its name; "" for one that ended since the tree was listed (a node command's shell)."""
    try:
        return process.name()
    except psutil.NoSuchProcess:
        return ""


def _agents(tree: list[psutil.Process], verb: str) -> list[psutil.Process]:
    found = []
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            if verb in process.cmdline() and any("agent" in a for a in process.cmdline()):
                found.append(process)
    return found


def _traces_of_ok_rows(run: Path) -> None:
    """Every ok row has its trace, whole (issue 13, item 5)."""
    for row in _rows(run):
        if row["status"] == "ok":
            trace = np.load(run / "power" / f"{row['trial_id']}.npy", allow_pickle=False)
            assert trace.ndim == 2 and trace.shape[1] == 2, row["trial_id"]
    assert not list((run / "power").glob("*.partial"))


# --- item 7: nothing a sweep started outlives it ---------------------------------------------


@pytest.mark.parametrize("moment", ["between-trials", "during-a-trial"])
def test_sigkill_of_the_controller_leaves_no_process_of_its_run(
    tmp_path: Path, moment: str
) -> None:
    # One window: the server agent serves every trial, never restarted in between.
    controller = _start(tmp_path, "run.repetitions=20", "sweep.initial_window_size=[65535]")
    try:
        run = _wait_for_rows(tmp_path, controller, 2)
        deadline = time.monotonic() + 60
        while True:
            tree = _tree(controller.pid)
            clients, servers = _agents(tree, "trial"), _agents(tree, "serve")
            if (moment == "during-a-trial") == bool(clients) and servers:
                break
            assert time.monotonic() < deadline, f"never {moment}"
            time.sleep(0.005)
        os.kill(controller.pid, signal.SIGKILL)
    finally:
        controller.kill()
        controller.communicate()
    assert len(servers) == 1  # the server agent was running, adopted by its anchor
    left = survivors([p.pid for p in tree], within_s=10)
    for process in tree:  # a failure of this test leaves nothing behind either
        with contextlib.suppress(psutil.NoSuchProcess):
            if not gone(process.pid):
                process.kill()
    assert left == []
    _traces_of_ok_rows(run)


# --- item 8: a kill during the idle baseline leaves a resumable run ----------------------------


def test_a_kill_during_the_idle_baseline_leaves_a_run_that_resume_alone_completes(
    tmp_path: Path,
) -> None:
    controller = _start(tmp_path, "run.repetitions=2", "run.idle_baseline_s=4")
    try:
        assert controller.stdout is not None
        for line in controller.stdout:
            if line.startswith("measuring idle power"):
                break
        else:
            pytest.fail("the sweep never measured its idle baseline: " + _output(controller))
        time.sleep(0.5)
        os.kill(controller.pid, signal.SIGKILL)
    finally:
        controller.kill()
        controller.communicate()
    run = _run_dir(tmp_path)
    assert run is not None
    assert "idle_baseline_mw" not in json.loads((run / "manifest.json").read_text())
    resumed = _h2iot("sweep", "--resume", str(run), "--no-dashboard")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["idle_baseline_s"] == 4 and manifest["idle_baseline_mw"] > 0
    assert {"nodes", "meter", "rtt_s", "config", "config_layers"} <= set(manifest)
    ok = sorted(r["trial_id"] for r in _rows(run) if r["status"] == "ok")
    assert ok == [f"t{i}" for i in range(1, 5)]
    _traces_of_ok_rows(run)


# --- item 9: the printed resume command is the whole command -----------------------------------


def test_the_printed_resume_command_alone_continues_a_run_started_with_overrides(
    tmp_path: Path,
) -> None:
    controller = _start(tmp_path, "run.repetitions=3", "run.name=with-overrides")
    run = _wait_for_rows(tmp_path, controller, 1)
    controller.send_signal(signal.SIGINT)  # Ctrl-C: pause after the trial in flight
    stdout, stderr = controller.communicate(timeout=120)
    assert controller.returncode == EXIT_PAUSED, stdout + stderr
    (printed,) = [line for line in stdout.splitlines() if line.startswith("resume: ")]
    command = shlex.split(printed.removeprefix("resume: "))
    assert command == ["h2iot", "sweep", "--resume", str(run)]
    resumed = _h2iot(*command[1:], "--no-dashboard")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ok = [r["trial_id"] for r in _rows(run) if r["status"] == "ok"]
    assert sorted(ok) == [f"t{i}" for i in range(1, 7)] and len(ok) == len(set(ok))
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    (resumed_event,) = [e for e in events if e["event"] == "sweep_resumed"]
    assert resumed_event["config_layers"][-1]["source"] == "--set"


def test_resume_flags_an_ok_row_without_its_trace(tmp_path: Path) -> None:
    controller = _start(tmp_path, "run.repetitions=2")
    run = _wait_for_rows(tmp_path, controller, 1)
    controller.send_signal(signal.SIGINT)
    controller.communicate(timeout=120)
    (first,) = [r["trial_id"] for r in _rows(run) if r["status"] == "ok"][:1]
    (run / "power" / f"{first}.npy").unlink()  # a run recorded row-first, killed in between
    resumed = _h2iot("sweep", "--resume", str(run), "--no-dashboard")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"1 ok rows have no power trace: {first}" in resumed.stdout
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert {"event": "traces_missing", "trial_ids": [first]}.items() <= next(
        e for e in events if e["event"] == "traces_missing"
    ).items()
    report = _h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    assert f"1 ({first})" in (run / "report" / "report.md").read_text()


# --- item 6: a disk that fills mid-sweep --------------------------------------------------------


def test_a_disk_that_fills_mid_sweep_stops_it_in_one_line_and_loses_no_row(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", "24m") as disk:
        out = disk / "runs"
        # 8 trials: the disk fills after the third, with most of the sweep still to run.
        controller = _start(out, "run.repetitions=4")
        try:
            run = _wait_for_rows(out, controller, 3)
            filler = fill(disk)
            before = (run / "trials.csv").read_bytes()
            stdout, stderr = controller.communicate(timeout=300)
        finally:
            controller.kill()
        assert controller.returncode == EXIT_DISK_FULL, stdout + stderr
        (line,) = stderr.splitlines()
        assert line.startswith(f"h2iot: error: {run}: the disk is full ("), line
        assert (run / "trials.csv").read_bytes().startswith(before)  # every row before it
        _traces_of_ok_rows(run)  # nothing half-written counted as ok
        rows = _rows(run)
        # Resuming on the still full disk stops at once, the same way, and adds nothing.
        again = _h2iot("sweep", "--resume", str(run), "--no-dashboard")
        assert again.returncode == EXIT_DISK_FULL, again.stdout + again.stderr
        assert again.stderr.startswith(f"h2iot: error: {run}: the disk is full (")
        assert _rows(run) == rows
        filler.unlink()
        done = _h2iot("sweep", "--resume", str(run), "--no-dashboard", timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        ok = [r["trial_id"] for r in _rows(run) if r["status"] == "ok"]
        assert len(ok) == len(set(ok)) == 8
        _traces_of_ok_rows(run)


# --- item 13: the simavr harness killed mid-sweep -----------------------------------------------


@pytest.mark.slow
def test_a_killed_simavr_harness_pauses_the_sweep_without_a_traceback(tmp_path: Path) -> None:
    require_tool("make", "gcc", "avr-gcc", "simavr")
    controller = _start(tmp_path, "run.repetitions=10", "meter.source=simavr")
    try:
        run = _wait_for_rows(tmp_path, controller, 1)
        (harness,) = [p for p in _tree(controller.pid) if _name(p).startswith("h2iot_sim")]
        harness.send_signal(signal.SIGKILL)
        stdout, stderr = controller.communicate(timeout=120)
    finally:
        controller.kill()
    assert controller.returncode == EXIT_PAUSED, stdout + stderr
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr
    assert "paused: MeterLost: " in stdout and "(simavr: simulator exited with -9" in stdout
    assert f"resume: h2iot sweep --resume {run}" in stdout


# --- item 14: a config that would hang every trial is refused ------------------------------------


def test_a_window_of_zero_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = _h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", "sweep.initial_window_size=[0, 65535]",
    )  # fmt: skip
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("h2iot: error: --set: sweep.initial_window_size[0]: a window of 0 ")
    assert not (tmp_path / "runs").exists()
