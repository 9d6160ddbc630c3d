"""Real agents: a client trial's record and the server's record of it carry the node's
conditions; `conditions` and `marker pulse` are commands a controller can run on a node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.servers import RunningServer, agent_server, run_agent
from tests.conftest import require_tool

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


def test_conditions_command_reports_the_node(tmp_path: Path) -> None:
    # A process that spins for the whole sampling interval must be named as busy.
    spinner = tmp_path / "spin.py"
    spinner.write_text(
        "import time\nend = time.monotonic() + 5\nwhile time.monotonic() < end: pass\n"
    )
    busy = subprocess.Popen([sys.executable, str(spinner)])
    try:
        result = run_agent("conditions", "--sample-s", "0.5")
    finally:
        busy.kill()
        busy.wait()
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    memory = report["memory_bytes"]
    assert memory["MemTotal"] >= memory["MemAvailable"] > 0
    assert "SwapTotal" in memory
    spinning = [p for p in report["busy_processes"] if p["pid"] == busy.pid]
    assert spinning and spinning[0]["cpu_pct"] > 20.0, report["busy_processes"]
    for name in ("cpu_freq_mhz", "governors", "temp_c", "throttled_flags"):
        assert report[name] is not None or report["unavailable"], name


def test_marker_pulse_writes_both_edges(tmp_path: Path) -> None:
    fifo = tmp_path / "marker"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        result = run_agent("marker", "pulse", "--marker", f"fifo:{fifo}", "--width-s", "0.05")
        edges = os.read(reader, 4096).split()
    finally:
        os.close(reader)
    assert result.returncode == 0, result.stderr
    assert edges == [b"1", b"0"]
    pulse = json.loads(result.stdout)
    assert pulse["marker"] == f"fifo:{fifo}"
    assert 0.05 <= pulse["width_s"] < 1.0


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
