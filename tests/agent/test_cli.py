"""The agent's command line: one-line errors with exit status 2 for usage mistakes, 1 for a
failed fetch, and the records a controller relies on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.commands import COMMANDS
from agent.site import load_manifest
from tests.agent.servers import RunningServer, agent_server, run_agent


@pytest.fixture(scope="module")
def server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(site, tmp_path_factory.mktemp("cli")) as running:
        yield running


def _one_line_usage_error(result: object, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr  # type: ignore[attr-defined]
    lines = result.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    assert lines[0].startswith("h2iot-agent: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["serve", "--root", ".", "--setting", "initial_window_size=2147483648"],
            ["initial_window_size=2147483648", "0..2147483647"],
        ),
        (["serve", "--root", ".", "--setting", "max_frame_size=100"], ["max_frame_size=100"]),
        (["serve", "--root", ".", "--setting", "bogus=1"], ["unknown HTTP/2 setting 'bogus'"]),
        (["serve", "--root", "/nonexistent/site"], ["--root /nonexistent/site"]),
        (["serve", "--root", ".", "--tls"], ["--tls needs --cert and --key"]),
        (["serve", "--workload", "blob", "--idle-timeout", "0"], ["--idle-timeout 0"]),
        (["serve", "--workload", "blob", "--handshake-timeout", "nan"], ["--handshake-timeout"]),
        (["serve", "--workload", "blob", "--max-connections", "0"], ["--max-connections 0"]),
        (["serve", "--workload", "blob", "--connection-memory", "0"], ["--connection-memory 0"]),
        (
            ["serve", "--root", ".", "--engine", "nghttp2", "--idle-timeout", "5"],
            ["--idle-timeout: nghttpd keeps its own limits"],
        ),
        (
            ["fetch", "http://127.0.0.1:1/", "--initial-window-size", "-1"],
            ["initial_window_size=-1"],
        ),
        (
            ["fetch", "http://127.0.0.1:1/", "--connection-window", "2147483648"],
            ["--connection-window"],
        ),
        (["fetch", "ftp://x/"], ["ftp://x/"]),
        (
            ["fetch", "http://127.0.0.1:1/", "--manifest", "/nonexistent/manifest.json"],
            ["/nonexistent/manifest.json"],
        ),
        (["fetch", "http://127.0.0.1:1/", "--repeat", "0"], ["--repeat 0"]),
        (["site", "build", "/tmp/x", "--total-bytes", "10"], []),
        (["fetch", "http://127.0.0.1:1/", "--no-such-option"], ["--no-such-option"]),
    ],
)
def test_usage_errors_are_one_line_with_status_2(args: list[str], fragments: list[str]) -> None:
    _one_line_usage_error(run_agent(*args), *fragments)


def test_marker_errors_name_the_marker(server: RunningServer, tmp_path: Path) -> None:
    _one_line_usage_error(run_agent("fetch", server.url, "--marker", "bogus"), "bogus")
    _one_line_usage_error(
        run_agent("fetch", server.url, "--marker", f"fifo:{tmp_path}/no-reader"), "fifo:"
    )


def test_version() -> None:
    result = run_agent("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("h2iot-agent ")


def _agent_modules_after(*argv: str) -> set[str]:
    """The agent's modules a fresh interpreter holds once the CLI has handled `argv` (only
    the agent's: under coverage the interpreter also holds coverage's own imports)."""
    probe = (
        "import sys\nfrom agent.cli import main\ntry:\n    main(sys.argv[1:])\n"
        "except SystemExit:\n    pass\nprint(' '.join(m for m in sys.modules if m.startswith("
        "'agent')), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True
    )
    return set(result.stderr.split())


def test_version_imports_no_command_and_no_workload() -> None:
    # The controller's first word with every node: it must cost a bare interpreter's start-up.
    assert _agent_modules_after("--version") == {
        "agent",
        "agent._version",
        "agent.cli",
        "agent.commands",
        "agent.errors",
    }


def test_a_command_imports_its_own_module_and_its_workload_only() -> None:
    loaded = _agent_modules_after("trial", "--workload", "page", "--help")
    assert "agent.commands.trial" in loaded
    assert not {"agent.commands.serve", "agent.commands.conditions"} & loaded
    assert not any(name.startswith("agent.workloads.payload") for name in loaded)
    loaded = _agent_modules_after("conditions", "--help")
    assert not any(name.startswith("agent.workloads.") for name in loaded), loaded


def test_help_lists_every_command_and_each_command_has_its_options() -> None:
    listing = run_agent("--help")
    assert listing.returncode == 0
    for name in COMMANDS:
        assert name in listing.stdout
    for name in COMMANDS:
        own = run_agent(name, "--help")
        assert own.returncode == 0, (name, own.stderr)
        assert own.stdout.startswith(f"usage: h2iot-agent {name}"), own.stdout
    assert "--initial-window-size" in run_agent("fetch", "--help").stdout
    assert "--initial-window-size" not in run_agent("trial", "--help").stdout


def test_site_build_writes_the_page_and_its_manifest(tmp_path: Path) -> None:
    result = run_agent(
        "site", "build", str(tmp_path / "s"), "--seed", "3", "--total-bytes", "300000"
    )
    assert result.returncode == 0, result.stderr
    manifest = load_manifest(tmp_path / "s")
    assert manifest.total_bytes == 300000
    assert len(manifest.files) == 8


def test_wrong_body_fails_the_trial_with_its_path(
    server: RunningServer, site: Path, tmp_path: Path
) -> None:
    document = json.loads((site / "manifest.json").read_text())
    document["files"][5]["sha256"] = "0" * 64
    wrong = tmp_path / "manifest.json"
    wrong.write_text(json.dumps(document))
    result = run_agent("fetch", server.url, "--manifest", str(wrong), "--json")
    assert result.returncode == 1
    record = json.loads(result.stdout)
    assert record["ok"] is False
    assert document["files"][5]["path"] in record["error"]
    assert "sha256" in record["error"]


def test_wrong_size_fails_the_trial(server: RunningServer, site: Path, tmp_path: Path) -> None:
    document = json.loads((site / "manifest.json").read_text())
    document["files"][2]["size_bytes"] += 1
    document["total_bytes"] += 1
    wrong = tmp_path / "manifest.json"
    wrong.write_text(json.dumps(document))
    result = run_agent("fetch", server.url, "--manifest", str(wrong), "--json")
    record = json.loads(result.stdout)
    assert result.returncode == 1
    assert "bytes, manifest says" in record["error"]


def test_fetch_record_has_every_field_a_controller_reads(server: RunningServer) -> None:
    result = run_agent(
        "fetch",
        server.url,
        "--json",
        "--repeat",
        "2",
        "--trial-id",
        "rec",
        "--initial-window-size",
        "4096",
        "--window-update",
        "every-frame",
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["trial_id"] for r in records] == ["rec-1", "rec-2"]
    record = records[0]
    for key in (
        "ok",
        "error",
        "trial_id",
        "settings",
        "flow_control",
        "response_s",
        "ttfb_s",
        "resources",
        "cpu_user_s",
        "cpu_sys_s",
        "cpu_pct",
        "rss_peak_bytes",
        "sent",
        "received",
        "t_wall_start_ns",
        "t_wall_end_ns",
        "t_mono_start_ns",
        "t_mono_end_ns",
        "probe_overhead_s",
        "cpu_pin",
        "marker",
    ):
        assert key in record, key
    assert record["flow_control"] == {
        "initial_window_size": 4096,
        "connection_window": 65535,
        "window_update_policy": "every-frame",
    }
    assert 0 < record["ttfb_s"] < record["response_s"]
    assert record["t_mono_end_ns"] - record["t_mono_start_ns"] == pytest.approx(
        record["response_s"] * 1e9, abs=10
    )
    # Every DATA frame is acknowledged under every-frame (the last of each stream needs none).
    data_frames = record["received"]["frames"]["DATA"]
    assert record["sent"]["frames"]["WINDOW_UPDATE"] >= data_frames
    assert record["probe_overhead_s"] < record["response_s"]
    trials = server.wait_for_trials("rec-1", "rec-2")
    assert trials["rec-2"]["overlapping_trials"] == []
    assert trials["rec-1"]["rss_peak_is_trial"] is True


def test_cpu_pinning_is_applied_and_recorded(server: RunningServer) -> None:
    core = sorted(os.sched_getaffinity(0))[-1]
    result = run_agent("fetch", server.url, "--json", "--cpu", str(core))
    assert json.loads(result.stdout)["cpu_pin"] == core
    _one_line_usage_error(run_agent("fetch", server.url, "--cpu", "4096"), "--cpu 4096")


def test_fifo_marker_raises_and_lowers_around_each_fetch(
    server: RunningServer, tmp_path: Path
) -> None:
    fifo = tmp_path / "marker"
    os.mkfifo(fifo)
    # Like the meter, the test holds the reading end open; its own idle writer keeps the reader
    # from seeing end-of-file before the fetch has written its edges.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    idle_writer = os.open(fifo, os.O_WRONLY)
    try:
        result = run_agent(
            "fetch", server.url, "--json", "--repeat", "2", "--marker", f"fifo:{fifo}"
        )
    finally:
        os.close(idle_writer)
    edges = [line.split()[0] for line in os.read(reader, 4096).splitlines()]
    os.close(reader)
    assert result.returncode == 0, result.stderr
    assert edges == [b"1", b"0", b"1", b"0"]
    assert json.loads(result.stdout.splitlines()[0])["marker"] == f"fifo:{fifo}"
