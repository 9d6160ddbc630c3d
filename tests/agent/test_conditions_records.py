"""Real agents: a client trial's record and the server's record of it carry the node's
conditions; `conditions` and `marker pulse` are commands a controller can run on a node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.agent.servers import RunningServer, agent_server, run_agent
from tests.conftest import require_tool

TICKS = os.sysconf("SC_CLK_TCK")
FIELDS = {"cpu_freq_mhz", "governor", "temp_c", "throttled_flags", "other_cpu_pct"}


@pytest.fixture(scope="module")
def server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(site, tmp_path_factory.mktemp("rig-conditions")) as running:
        yield running


def _complete(conditions: object) -> dict[str, object]:
    """Every field is a value or None with a reason; the other load is always measured."""
    assert isinstance(conditions, dict)
    reasons = conditions["unavailable"]
    assert isinstance(reasons, dict)
    for name in FIELDS:
        assert (conditions[name] is None) == (name in reasons), (name, conditions)
    assert isinstance(conditions["other_cpu_pct"], float)
    assert conditions["other_cpu_pct"] >= 0.0
    return conditions


def test_both_records_carry_the_nodes_conditions(server: RunningServer) -> None:
    core = sorted(os.sched_getaffinity(0))[0]
    result = run_agent("fetch", server.url, "--json", "--trial-id", "cond", "--cpu", str(core))
    assert result.returncode == 0, result.stderr
    client = _complete(json.loads(result.stdout)["conditions"])
    assert client["cpus"] == [core]  # the pinned node counts its own core only
    server_record = server.wait_for_trials("cond")["cond"]
    _complete(server_record["conditions"])


class _CpuTrace(threading.Thread):
    """A process's CPU ticks (/proc/PID/stat utime + stime) polled with the time, so a share
    reported for some window inside the trace can be compared with what the trace saw."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.points: list[tuple[float, int]] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            text = Path(f"/proc/{self.pid}/stat").read_text()
            fields = text[text.rindex(")") + 2 :].split()
            self.points.append((time.monotonic(), int(fields[11]) + int(fields[12])))
            self._done.wait(0.002)

    def finish(self) -> None:
        self._done.set()
        self.join()

    def share_range_pct(self, shortest_s: float) -> tuple[float, float]:
        """The lowest and highest share of a core over any traced window at least `shortest_s`
        long."""
        t = np.array([p[0] for p in self.points])
        ticks = np.array([p[1] for p in self.points], dtype=float)
        low, high = np.inf, -np.inf
        for i in range(len(t)):
            j = int(np.searchsorted(t, t[i] + shortest_s))
            if j == len(t):
                break
            shares = 100.0 * (ticks[j:] - ticks[i]) / TICKS / (t[j:] - t[i])
            low, high = min(low, float(shares.min())), max(high, float(shares.max()))
        return low, high

    def widest_gap(self) -> tuple[float, float]:
        """The longest time between two polls, and the most CPU seconds between two polls."""
        t = np.array([p[0] for p in self.points])
        ticks = np.array([p[1] for p in self.points], dtype=float)
        return float(np.diff(t).max()), float(np.diff(ticks).max()) / TICKS


def test_conditions_command_reports_the_node(tmp_path: Path) -> None:
    # A process that spins for the whole sampling interval must be named as busy, with the share
    # of a core it had then. How much it gets depends on the machine's load, so the test
    # measures it too, polling the process's CPU time while the command samples it.
    spinner = tmp_path / "spin.py"
    spinner.write_text("while True: pass\n")
    busy = subprocess.Popen([sys.executable, str(spinner)])
    sample_s = 2.0
    try:
        trace = _CpuTrace(busy.pid)
        trace.start()
        try:
            result = run_agent("conditions", "--sample-s", str(sample_s))
        finally:
            trace.finish()
    finally:
        busy.kill()
        busy.wait()
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    memory = report["memory_bytes"]
    assert memory["MemTotal"] >= memory["MemAvailable"] > 0
    assert "SwapTotal" in memory
    spinning = [p for p in report["busy_processes"] if p["pid"] == busy.pid]
    assert spinning, report["busy_processes"]
    # Each end of the command's window lies between two polls, so its share is within the
    # traced range give or take, at each end, the CPU time and the wall time between two polls,
    # and the time the command spends reading /proc at the ends of its window (10 %).
    low, high = trace.share_range_pct(sample_s)
    gap_s, gap_cpu_s = trace.widest_gap()
    relative = 0.1 + 2 * gap_s / sample_s
    absolute = 100.0 * 2 * gap_cpu_s / sample_s
    reported = spinning[0]["cpu_pct"]
    assert (1 - relative) * low - absolute <= reported <= (1 + relative) * high + absolute, (
        reported, low, high, gap_s, gap_cpu_s,
    )  # fmt: skip
    for name in ("cpu_freq_mhz", "governors", "temp_c", "throttled_flags"):
        assert report[name] is not None or report["unavailable"], name


def test_marker_pulse_writes_both_edges(tmp_path: Path) -> None:
    fifo = tmp_path / "marker"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        began_ns = time.monotonic_ns()
        result = run_agent("marker", "pulse", "--marker", f"fifo:{fifo}", "--width-s", "0.05")
        ended_ns = time.monotonic_ns()
        lines = os.read(reader, 4096).decode().splitlines()
    finally:
        os.close(reader)
    assert result.returncode == 0, result.stderr
    (rising, rose_ns), (falling, fell_ns) = (line.split() for line in lines)
    assert (rising, falling) == ("1", "0")
    assert began_ns < int(rose_ns) < int(fell_ns) < ended_ns
    pulse = json.loads(result.stdout)
    assert pulse["marker"] == f"fifo:{fifo}"
    # The width the node reports is the one its line carried to the meter; a loaded machine
    # sleeps longer, never shorter.
    assert pulse["width_s"] == (int(fell_ns) - int(rose_ns)) / 1e9 >= 0.05


def test_marker_pulse_without_a_reader_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "marker"
    os.mkfifo(fifo)
    result = run_agent("marker", "pulse", "--marker", f"fifo:{fifo}")
    assert result.returncode != 0
    assert result.stderr.strip().startswith("h2iot-agent: error: --marker fifo:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_nghttp2_client_record_carries_them_too(server: RunningServer, site: Path) -> None:
    require_tool("nghttp")
    result = run_agent(
        "fetch", server.url, "--json", "--trial-id", "ng-cond", "--engine", "nghttp2",
        "--manifest", str(site / "manifest.json"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    _complete(json.loads(result.stdout)["conditions"])
