"""Each engine's client against each engine's server, with real nghttp and nghttpd: the fetch
records and the server's per-trial records, and the byte counts of one side checked against the
other's exact ones."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.site import load_manifest
from tests.agent.nghttp2_servers import NghttpdAgent, nghttpd_agent
from tests.agent.servers import RunningServer, agent_server, free_port, run_agent
from tests.conftest import require_tool, without_sbin


@pytest.fixture(scope="module")
def nghttpd_server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NghttpdAgent]:
    require_tool("nghttpd")
    with nghttpd_agent(site, tmp_path_factory.mktemp("nghttpd-agent"),
                       "--setting", "initial_window_size=65535") as server:  # fmt: skip
        yield server


@pytest.fixture(scope="module")
def h2_server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(site, tmp_path_factory.mktemp("h2-server")) as server:
        yield server


def _fetch(url: str, site: Path, trial_id: str, *extra: str) -> dict[str, Any]:
    result = run_agent("fetch", url, "--json", "--trial-id", trial_id,
                       "--manifest", str(site / "manifest.json"), *extra)  # fmt: skip
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    record: dict[str, Any] = json.loads(line)
    assert record["ok"], record["error"]
    return record


def _trial(records: list[dict[str, Any]], trial_id: str) -> dict[str, Any]:
    (record,) = [r for r in records if r["trial_id"] == trial_id]
    return record


def _page_bytes(site: Path) -> int:
    return sum(f.size_bytes for f in load_manifest(site).files)


def _check_nghttp2_client_record(record: dict[str, Any], site: Path, window: int) -> None:
    assert record["engine"] == "nghttp2" and record["verification"] == "size"
    assert record["body_bytes"] == _page_bytes(site)
    assert len(record["resources"]) == len(load_manifest(site).files)
    assert all(r["verified"] and r["status"] == 200 for r in record["resources"])
    assert 0 < record["ttfb_s"] <= record["response_s"] <= record["process_wall_s"]
    assert record["cpu_s"] > 0 and record["rss_peak_bytes"] > 2**20
    assert record["cpu_s"] == pytest.approx(record["cpu_user_s"] + record["cpu_sys_s"])
    assert (
        record["settings"]["initial_window_size"] == record["flow_control"]["initial_window_size"]
    )
    assert record["flow_control"]["initial_window_size_requested"] == window
    assert record["t_mono_end_ns"] - record["t_mono_start_ns"] == pytest.approx(
        record["process_wall_s"] * 1e9, abs=1
    )


def test_nghttp2_client_against_nghttpd(nghttpd_server: NghttpdAgent, site: Path) -> None:
    require_tool("nghttp")
    record = _fetch(nghttpd_server.url, site, "ng-ng", "--engine", "nghttp2",
                    "--initial-window-size", "4096", "--connection-window", "4096",
                    "--trial-control", nghttpd_server.control)  # fmt: skip
    _check_nghttp2_client_record(record, site, 4096)
    assert record["flow_control"]["initial_window_size_on_wire"] == 4095
    assert record["flow_control"]["mapped"] is True
    server = _trial(nghttpd_server.trials(), "ng-ng")
    assert server["ok"] and server["requests"] == len(record["resources"])
    assert server["engine"] == "nghttp2" and server["cpu_source"] in ("schedstat", "ticks")
    assert 0 < server["cpu_s"] <= server["serve_s"]
    assert server["rss_peak_is_trial"] and server["rss_peak_bytes"] > 0
    # nghttpd wrote the bodies plus frame headers and response HEADERS, nothing else.
    sent = server["sent"]["bytes"] - _page_bytes(site)
    assert 0 < sent < 0.02 * _page_bytes(site)


def test_nghttp2_client_against_the_h2_server(h2_server: RunningServer, site: Path) -> None:
    require_tool("nghttp")
    record = _fetch(h2_server.url, site, "ng-h2", "--engine", "nghttp2",
                    "--initial-window-size", "1024", "--connection-window", "65535")  # fmt: skip
    _check_nghttp2_client_record(record, site, 1024)
    server = h2_server.wait_for_trials("ng-h2")["ng-h2"]
    assert server["ok"] and server["requests"] == len(record["resources"])
    # What nghttp wrote to its socket, by /proc/PID/io, is what the h2 server's tally received.
    assert record["sent"]["bytes"] == server["received"]["bytes"]
    assert record["settings"] == {"max_concurrent_streams": 100, "initial_window_size": 1023,
                                  "enable_push": 0}  # fmt: skip


def test_h2_client_against_nghttpd(nghttpd_server: NghttpdAgent, site: Path) -> None:
    record = _fetch(nghttpd_server.url, site, "h2-ng", "--initial-window-size", "65535",
                    "--trial-control", nghttpd_server.control)  # fmt: skip
    assert record["engine"] == "builtin"
    server = _trial(nghttpd_server.trials(), "h2-ng")
    assert server["ok"] and server["requests"] == len(record["resources"])
    # What nghttpd wrote to its socket, by /proc/PID/io, is what the h2 client's tally received.
    assert server["sent"]["bytes"] == record["received"]["bytes"]
    assert record["peer_settings"]["initial_window_size"] == 65535


def test_the_announced_settings_are_what_nghttpd_receives(site: Path, tmp_path: Path) -> None:
    """nghttpd -v prints the SETTINGS it receives: the record must list exactly those."""
    require_tool("nghttp", "nghttpd")
    port = free_port()
    log = tmp_path / "nghttpd.log"
    with log.open("w") as out:
        server = subprocess.Popen(["nghttpd", "-v", "--no-tls", "-a", "127.0.0.1", "-d",
                                   str(site), str(port)], stdout=out, stderr=out)  # fmt: skip
    try:
        _wait_listening(log, server)
        result = run_agent("fetch", f"http://127.0.0.1:{port}/", "--json", "--engine", "nghttp2",
                           "--manifest", str(site / "manifest.json"), "--setting",
                           "header_table_size=8192", "--setting", "max_concurrent_streams=7",
                           "--initial-window-size", "65535")  # fmt: skip
    finally:
        server.terminate()
        server.wait()
    record = json.loads(result.stdout)
    assert record["ok"], record["error"]
    settings_frame = r"recv SETTINGS frame <[^>]*flags=0x00[^>]*>\n\s+\(niv=\d+\)\n"
    received = re.search(settings_frame + r"((?:\s+\[.*\n)+)", log.read_text())
    assert received is not None
    seen = {
        name.lower(): int(value)
        for name, value in re.findall(r"\[SETTINGS_(\w+)\(0x..\):(\d+)\]", received.group(1))
    }
    assert record["settings"] == seen
    # The record's announcement, read from nghttp's argv, by RFC 9113's names: the frame's.
    assert record["settings_announced"] == {f"SETTINGS_{k.upper()}": v for k, v in seen.items()}


def _wait_listening(log: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while "listen" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)


def _bare_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has no nghttp2 tools."""
    return {**os.environ, "PATH": str(tmp_path)}


def test_a_missing_nghttp_names_its_package(site: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent.cli", "fetch", "http://127.0.0.1:1/", "--engine",
         "nghttp2", "--manifest", str(site / "manifest.json")],
        capture_output=True, text=True, env=_bare_path(tmp_path), check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        "h2iot-agent: error: nghttp not found on PATH nor in /usr/local/sbin, /usr/sbin, /sbin: "
        "install the Debian package nghttp2-client (apt install nghttp2-client)\n"
    )
    # nghttpd is looked for in the sbin directories too: here they are empty.
    served = subprocess.run(
        without_sbin([sys.executable, "-m", "agent.cli", "serve", "--engine", "nghttp2",
                      "--root", str(site)], str(tmp_path)),
        capture_output=True, text=True, env=_bare_path(tmp_path), check=False,
    )  # fmt: skip
    assert served.returncode == 1, served.stderr
    assert (
        "nghttpd not found on PATH nor in /usr/local/sbin, /usr/sbin, /sbin: install the "
        "Debian package nghttp2-server" in served.stderr
    )


def test_reject_is_a_usage_error(site: Path) -> None:
    result = run_agent("fetch", "http://127.0.0.1:1/", "--engine", "nghttp2", "--manifest",
                       str(site / "manifest.json"), "--initial-window-size", "4096",
                       "--unrepresentable-window", "reject")  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("h2iot-agent: error: initial_window_size 4096 is not 2^N")
    assert len(result.stderr.splitlines()) == 1
    served = run_agent("serve", "--engine", "nghttp2", "--root", str(site), "--setting",
                       "initial_window_size=300", "--unrepresentable-window", "reject")  # fmt: skip
    assert served.returncode == 2 and "initial_window_size 300 is not" in served.stderr


def test_a_busy_port_is_a_usage_error(nghttpd_server: NghttpdAgent, site: Path) -> None:
    port = str(nghttpd_server.listening["port"])
    result = run_agent("serve", "--engine", "nghttp2", "--root", str(site), "--port", port)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(f"h2iot-agent: error: cannot listen on "
                                                     f"127.0.0.1:{port}: ")  # fmt: skip


def test_nghttpd_dies_with_its_agent_and_the_agent_with_nghttpd(site: Path, tmp_path: Path) -> None:
    require_tool("nghttpd")
    with nghttpd_agent(site, tmp_path) as server:
        nghttpd_pid = server.listening["nghttpd_pid"]
        os.kill(nghttpd_pid, signal.SIGKILL)
        assert server.process.wait(timeout=10) == 1
        assert "nghttpd exited -9" in server.stderr()
    with nghttpd_agent(site, tmp_path) as server:
        nghttpd_pid = server.listening["nghttpd_pid"]
        server.process.kill()
        server.process.wait()
        deadline = time.monotonic() + 10
        while _alive(nghttpd_pid):
            assert time.monotonic() < deadline, "nghttpd outlived its agent"
            time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_tls_nghttp_against_nghttpd(site: Path, tmp_path: Path) -> None:
    require_tool("nghttp", "nghttpd", "openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    with nghttpd_agent(site, tmp_path, "--tls", "--cert", str(cert), "--key", str(key)) as server:
        assert server.listening["scheme"] == "https"
        url = f"https://127.0.0.1:{server.listening['port']}/"
        record = _fetch(url, site, "tls", "--engine", "nghttp2", "--trial-control", server.control)
        assert record["tls"] is True and record["body_bytes"] == _page_bytes(site)
        trial = _trial(server.trials(), "tls")
        # TLS records and their overhead: more bytes written than the plain page.
        assert trial["ok"] and trial["sent"]["bytes"] > _page_bytes(site)
