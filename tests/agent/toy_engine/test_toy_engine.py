"""An engine of one's own (issue 35): the toy of this folder, declared through the
`h2iot.engines` entry point with no file of the project touched, serves the blob workload over
h2c through nghttpd; the agent's own client fetches and verifies it, and the controller's config
takes the engine by name and asks it what it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_tool

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def run_agent(*args: str) -> subprocess.CompletedProcess[str]:
    """The agent with the toy's folder on its path, as an installed engine package is."""
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args],
        capture_output=True, text=True, timeout=120, check=False, env=ENV, cwd=REPO,
    )  # fmt: skip


def test_the_toy_engine_serves_a_blob_the_builtin_client_verifies() -> None:
    require_tool("nghttpd")
    server = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "serve", "--engine", "toy", "--workload", "blob",
         "--port", "0"],
        stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        listening = json.loads(server.stderr.readline())
        assert listening["event"] == "listening"
        url = f"http://127.0.0.1:{listening['port']}/"
        result = run_agent("trial", url, "--workload", "blob", "--json")
        assert result.returncode == 0, result.stderr
        record = json.loads(result.stdout.splitlines()[-1])
        assert record["ok"], record["error"]
        assert (record["engine"], record["protocol"]) == ("builtin", "h2c")
        assert record["metrics"]["request_count"] == 4
        assert record["metrics"]["body_bytes"] == 4 * 65536  # each body's sha256 checked
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--engine", "toy", "--workload", "page", "--root", "."],
         "--engine toy: the page workload runs on builtin or nghttp2"),
        (["trial", "http://127.0.0.1:1/", "--engine", "toy", "--workload", "blob"],
         "--engine toy only serves; a client runs builtin or nghttp2"),
    ],
)  # fmt: skip
def test_what_the_toy_cannot_run_is_refused_by_its_declaration(
    argv: list[str], message: str
) -> None:
    result = run_agent(*argv)
    assert result.returncode == 2
    assert message in result.stderr


def test_the_config_takes_the_toy_and_asks_it() -> None:
    probe = """
from controller.config import load_config
from controller.errors import ConfigError
keys = ['workload.kind="blob"', 'sweep={requests=[4]}', 'nodes.server.engine="toy"']
print(load_config(None, keys).server.engine)
for refused in ('workload.protocol="h2"', 'sweep={initial_window_size=[4096]}'):
    try:
        load_config(None, [*keys, refused])
    except ConfigError as exc:
        print(exc)
"""
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, env=ENV, cwd=REPO, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    engine, protocol, setting = result.stdout.splitlines()
    assert engine == "toy"
    assert (
        '"h2" runs on engine "builtin" or "nghttp2" or "hypercorn", not nodes.server.engine = "toy"'
    ) in protocol
    assert "nghttpd has no option to announce it" in setting
    assert "it announces none" in setting


def test_nothing_outside_this_folder_names_the_toy() -> None:
    tracked = subprocess.run(
        ["git", "grep", "-l", "h2iot_toy_engine", "--", ":!tests/agent/toy_engine"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert tracked.stdout == ""
