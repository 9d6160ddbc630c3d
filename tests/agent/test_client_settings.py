"""The client's SETTINGS from its command line to the wire: one record, the window one of its
entries, read here from the first SETTINGS frame a listening socket receives."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from hyperframe.frame import Frame, SettingsFrame

from agent.h2.frames import CLIENT_PREFACE
from tests.agent.servers import AGENT, run_agent

_HEADER_BYTES = 9
SETTING_CODES = {
    "header_table_size": SettingsFrame.HEADER_TABLE_SIZE,
    "enable_push": SettingsFrame.ENABLE_PUSH,
    "max_concurrent_streams": SettingsFrame.MAX_CONCURRENT_STREAMS,
    "initial_window_size": SettingsFrame.INITIAL_WINDOW_SIZE,
    "max_frame_size": SettingsFrame.MAX_FRAME_SIZE,
    "max_header_list_size": SettingsFrame.MAX_HEADER_LIST_SIZE,
    "enable_connect_protocol": 0x8,
}


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, f"the client closed after {len(data)} of {size} bytes"
        data += chunk
    return data


def first_settings_frame(
    site: Path, *options: str, verb: str = "fetch"
) -> tuple[dict[int, int], dict[str, object]]:
    """The client's first SETTINGS frame as its peer receives it, and the client's record (a
    failed one: this peer hangs up after reading the frame). `verb`: fetch, or a blob trial."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(20)
        port = listener.getsockname()[1]
        argv = [*AGENT, verb, f"http://127.0.0.1:{port}/", "--json"]
        if verb == "fetch":
            argv += ["--manifest", str(site / "manifest.json")]
        else:
            argv += ["--workload", "blob"]
        client = subprocess.Popen([*argv, *options], stdout=subprocess.PIPE, text=True)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(20)
            assert _read_exactly(conn, len(CLIENT_PREFACE)) == CLIENT_PREFACE
            frame, length = Frame.parse_frame_header(memoryview(_read_exactly(conn, _HEADER_BYTES)))
            frame.parse_body(memoryview(_read_exactly(conn, length)))
        stdout, _ = client.communicate(timeout=60)
    assert isinstance(frame, SettingsFrame)
    return dict(frame.settings), json.loads(stdout)


@pytest.mark.parametrize(
    ("options", "window"),
    [
        ((), 65535),
        (("--setting", "initial_window_size=256"), 256),
        (("--initial-window-size", "256"), 256),
        (("--initial-window-size", "4096", "--setting", "SETTINGS_INITIAL_WINDOW_SIZE=4096"), 4096),
    ],
)
def test_the_window_reaches_the_settings_frame(site: Path, options: tuple[str, ...], window: int):
    on_wire, record = first_settings_frame(site, *options)
    assert record["workload"] == "page"
    assert on_wire[SettingsFrame.INITIAL_WINDOW_SIZE] == window
    assert record["settings"]["initial_window_size"] == window  # type: ignore[index]
    assert record["flow_control"]["initial_window_size"] == window  # type: ignore[index]


def test_the_settings_record_is_the_frame(site: Path):
    on_wire, record = first_settings_frame(
        site, "--setting", "initial_window_size=1000", "--setting", "max_frame_size=20000"
    )
    names = {code: name for name, code in SETTING_CODES.items()}
    assert {names[code]: value for code, value in on_wire.items()} == record["settings"]
    assert record["settings"] == {
        "header_table_size": 4096,  # h2's own, sent unasked
        "enable_connect_protocol": 0,  # likewise (RFC 8441)
        "enable_push": 0,
        "max_concurrent_streams": 100,
        "max_header_list_size": 65536,
        "initial_window_size": 1000,
        "max_frame_size": 20000,
    }


def test_the_alias_and_the_setting_must_agree():
    result = run_agent(
        "fetch",
        "http://127.0.0.1:1/",
        "--initial-window-size",
        "1000",
        "--setting",
        "initial_window_size=2000",
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert "--initial-window-size 1000" in lines[0]
    assert "initial_window_size=2000" in lines[0]


@pytest.mark.parametrize("window", [256, 0, 2**31 - 1])
def test_a_trial_of_any_workload_announces_the_window(site: Path, window: int):
    setting = f"initial_window_size={window}"
    on_wire, record = first_settings_frame(site, "--setting", setting, verb="trial")
    assert record["workload"] == "blob"
    assert on_wire[SettingsFrame.INITIAL_WINDOW_SIZE] == window
    assert record["flow_control"]["initial_window_size"] == window  # type: ignore[index]
