"""`h2iot nodes check|deploy` on local nodes and on configs that cannot work (no root needed)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from agent import __version__
from controller.cli import main

LOCAL_PYTHON = [
    f"--set=nodes.client.python={sys.executable}",
    f"--set=nodes.server.python={sys.executable}",
]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["nodes", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_check_local_nodes(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Wide enough that no cell wraps: rich's 80 columns broke "0 (same clock)" in two beside a
    # long CPU model name ("Intel(R) Xeon(R) Processor" on a fresh CI machine).
    monkeypatch.setenv("COLUMNS", "200")
    config = tmp_path / "local.toml"
    config.write_text("")
    status, out, err = run(capsys, "check", str(config), *LOCAL_PYTHON)
    assert (status, err) == (0, "")
    for role in ("client", "server"):
        (row,) = [line for line in out.splitlines() if f"{role} (local)" in line]
        assert __version__ in row
        assert "0 (same clock)" in row


def test_check_reports_a_node_without_the_agent(capsys, tmp_path: Path):
    config = tmp_path / "local.toml"
    config.write_text('[nodes.server]\npython = "/no/such/python"\n')
    status, _, err = run(capsys, "check", str(config), LOCAL_PYTHON[0])
    assert status == 1
    assert err.startswith("h2iot: error: server (local): `/no/such/python -c")
    assert all(line.startswith("h2iot: error: server (local): ") for line in err.splitlines())


def test_deploy_leaves_local_nodes_alone(capsys, tmp_path: Path):
    config = tmp_path / "local.toml"
    config.write_text("")
    status, out, _ = run(capsys, "deploy", str(config))
    assert status == 0
    assert "client (local): local, runs from this controller's installation" in out


def test_bad_config_and_options_exit_2_with_one_line(capsys, tmp_path: Path):
    config = tmp_path / "bad.toml"
    config.write_text("[nodes.client]\nport = 0\n")
    status, _, err = run(capsys, "check", str(config))
    assert status == 2
    assert err.count("\n") == 1
    assert "nodes.client.port" in err
    config.write_text("")
    status, _, err = run(capsys, "check", str(config), "--clock-samples", "0")
    assert (status, err) == (2, "h2iot: error: --clock-samples 0: must be at least 1\n")


def test_an_unreachable_ssh_node_is_one_line_and_exit_1(capsys, tmp_path: Path):
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    config = tmp_path / "ssh.toml"
    config.write_text(
        f'[nodes.server]\nhost = "127.0.0.1"\nport = 1\nknown_hosts = "{known_hosts}"\n'
    )
    for action in ("check", "deploy"):
        status, _, err = run(capsys, action, str(config), LOCAL_PYTHON[0])
        assert status == 1
        assert err.startswith("h2iot: error: server (127.0.0.1:1): cannot reach 127.0.0.1:1: ")
        assert err.count("\n") == 1


def test_check_with_http3_reaches_the_servers_udp_port(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("COLUMNS", "200")
    config = tmp_path / "h3.toml"
    config.write_text('[workload]\nprotocol = "h3"\n')
    status, out, err = run(capsys, "check", str(config), *LOCAL_PYTHON)
    assert (status, err) == (0, "")
    (row,) = [line for line in out.splitlines() if "echo: UDP 127.0.0.1:" in line]
    assert "client (local)" in row and "server (local)" in row
    assert "a 1200-byte datagram echoed in " in row
    # Without HTTP/3 trials there is nothing on UDP to check.
    config.write_text("")
    assert "UDP" not in run(capsys, "check", str(config), *LOCAL_PYTHON)[1]


def test_check_with_http3_where_nothing_listens_is_one_line_and_exit_1(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The client sends to 127.0.0.2 (this host too) while the server listens on 127.0.0.1 only.
    monkeypatch.setenv("COLUMNS", "200")
    config = tmp_path / "h3.toml"
    config.write_text(
        '[workload]\nprotocol = "h3"\n[nodes.client]\naddress = "127.0.0.2"\n'
        '[nodes.server]\naddress = "127.0.0.1"\n'
    )
    status, out, err = run(capsys, "check", str(config), *LOCAL_PYTHON)
    assert status == 1
    (error,) = err.splitlines()
    assert re.fullmatch(
        r"h2iot: error: client \(local\) -> server \(local\): HTTP/3 UDP 127\.0\.0\.2:(\d+): ICMP "
        r"port unreachable, nothing listens there \(the server's listener is on 127\.0\.0\.1:\1\)",
        error,
    ), error
    assert "refused: UDP 127.0.0.2:" in out
