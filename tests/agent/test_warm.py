"""`h2iot-agent warm` (agent.warm): its request parsing over any bytes, one CLI run captured,
and the real process: a ready file only its user reads, a wrong token dropped, one controller
served until it hangs up, an exit when nobody comes."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.trial_request import TrialRequest
from agent.warm import WarmProtocolError, WarmReply, parse_request, run_one


@given(st.binary(max_size=200))
@example(b"[" * 100_000)
@example(b'{"argv": ["trial", "http://x/"]}')
@example(b'{"request": {}}')
@example(b'{"request": {"url": "http://x/", "engine": ["a"]}}')
@example(b'{"request": {"url": "http://x/", "settings": [["a"]]}}')
@example(b'{"request": {"url": "http://x/", "cores": 3}}')
@example(b"\xff\xfe")
def test_any_bytes_are_a_trials_argv_or_one_refusal(line: bytes) -> None:
    try:
        argv = parse_request(line)
    except WarmProtocolError as exc:
        assert str(exc).startswith("warm request: ") and "\n" not in str(exc)
        assert exc.exit_status == 2
    else:
        assert argv[0] == "trial" and all(isinstance(word, str) for word in argv)


def test_a_request_line_is_the_trial_words_a_fresh_agent_gets() -> None:
    request = TrialRequest(
        "https://x:1/",
        workload="blob",
        protocol="h3",
        params=(("size_bytes", 4096), ("verify", True)),
        settings=(("initial_window_size", 255),),
        start_at_s=1765000000.123456,
        timeout_s=30.0,
        cpu=1,
    )
    assert parse_request(request.json_line()) == request.argv()
    assert request.argv()[:3] == ["trial", "https://x:1/", "--json"]


@given(
    st.builds(
        TrialRequest,
        url=st.text(min_size=1),
        workload=st.text(min_size=1),
        params=st.lists(st.tuples(st.text(), st.integers() | st.booleans() | st.text())).map(tuple),
        settings=st.lists(st.tuples(st.text(), st.integers())).map(tuple),
        connection_window=st.none() | st.integers(),
        start_at_s=st.none() | st.floats(allow_nan=False, allow_infinity=False),
        trial_id=st.none() | st.text(),
    )
)
def test_a_request_survives_its_json_line(request: TrialRequest) -> None:
    assert TrialRequest.from_json(json.loads(request.json_line())["request"]) == request


def test_one_run_captures_its_output_status_and_span() -> None:
    def main(argv: Sequence[str]) -> int:
        print("record", *argv)
        print("h2iot-agent: error: a line", file=sys.stderr)
        sum(range(200_000))  # some CPU
        return 1

    reply = run_one(["trial", "u"], main)
    assert reply.stdout == "record trial u\n"
    assert reply.stderr == "h2iot-agent: error: a line\n"
    assert reply.exit_status == 1
    assert reply.t_mono_end_ns >= reply.t_mono_start_ns and reply.cpu_s > 0
    assert WarmReply(**json.loads(reply.line())) == reply


def test_a_help_request_exits_like_the_cli_without_ending_the_agent() -> None:
    def main(_argv: Sequence[str]) -> int:
        raise SystemExit(0)

    assert run_one(["trial", "--help"], main).exit_status == 0


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    ready = tmp_path / "ready.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "warm", "--ready-file", str(ready), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no ready file"
        time.sleep(0.02)
    assert stat.S_IMODE(ready.stat().st_mode) == 0o600
    return process, json.loads(ready.read_text())


@pytest.fixture
def warm(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, object]]]:
    process, ready = _start(tmp_path)
    yield process, ready
    process.kill()
    process.wait()


def _connect(ready: dict[str, object], token: object) -> tuple[socket.socket, object]:
    conn = socket.create_connection(("127.0.0.1", int(str(ready["port"]))), timeout=30)
    conn.sendall(json.dumps({"token": token}).encode() + b"\n")
    return conn, conn.makefile("rb")


def test_a_wrong_token_is_dropped_and_the_controller_is_served_until_it_hangs_up(
    warm: tuple[subprocess.Popen[bytes], dict[str, object]],
) -> None:
    process, ready = warm
    assert ready["pid"] == process.pid
    stranger, stranger_reader = _connect(ready, "0" * 32)
    assert stranger_reader.readline() == b""  # type: ignore[attr-defined]
    stranger_reader.close()  # type: ignore[attr-defined]
    stranger.close()
    conn, reader = _connect(ready, ready["token"])
    assert json.loads(reader.readline()) == {"ok": True}  # type: ignore[attr-defined]
    conn.sendall(TrialRequest("http://127.0.0.1:9/", workload="nope").json_line())
    answer = json.loads(reader.readline())  # type: ignore[attr-defined]
    assert answer["exit_status"] == 2
    assert answer["stderr"].startswith("h2iot-agent: error: unknown workload 'nope'")
    conn.sendall(b"not json\n")
    answer = json.loads(reader.readline())  # type: ignore[attr-defined]
    assert answer["exit_status"] == 2 and "warm request: not JSON" in answer["stderr"]
    reader.close()  # type: ignore[attr-defined]
    conn.close()
    assert process.wait(timeout=30) == 0


def test_nobody_connecting_ends_the_agent_in_one_line(tmp_path: Path) -> None:
    process, _ready = _start(tmp_path, "--accept-timeout", "0.5")
    _stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert stderr.decode().strip().splitlines() == [
        "h2iot-agent: error: warm: no controller connected within 0.5 s"
    ]
