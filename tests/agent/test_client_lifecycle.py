"""The client connection's lifecycle (agent.client.lifecycle): its table pair by pair, and why a
connection ended, as a trial's record says it, against a raw server that ends it at each stage."""

from __future__ import annotations

import itertools
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hyperframe.frame import GoAwayFrame, SettingsFrame
from hypothesis import given
from hypothesis import strategies as st

from agent.client.lifecycle import TRANSITIONS, ClientLifecycle, Input, State, lost_reason
from tests.agent.lifecycle_checks import check_pair
from tests.agent.servers import run_agent

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@pytest.mark.parametrize(("state", "event"), list(itertools.product(State, Input)))
def test_every_pair_follows_the_table_or_is_refused(state: State, event: Input) -> None:
    check_pair(ClientLifecycle(), TRANSITIONS, state, event)


@given(st.lists(st.sampled_from(Input), max_size=30))
def test_input_sequences_follow_the_table(events: list[Input]) -> None:
    lifecycle = ClientLifecycle()
    for event in events:
        check_pair(lifecycle, TRANSITIONS, lifecycle.state, event)


def test_every_state_but_new_ends_closed_and_only_a_loss_we_did_not_cause_is_told() -> None:
    for state in set(State) - {State.NEW, State.CLOSED}:
        assert TRANSITIONS[(state, Input.LOST)] is State.CLOSED
    told = {state for state in State if lost_reason(state, None) is not None}
    assert told == {State.HANDSHAKE, State.OPEN, State.GONE_AWAY}
    reset = lost_reason(State.OPEN, ConnectionResetError(104, "Connection reset by peer"))
    assert reset == (
        "connection lost with the trial's streams open: ConnectionResetError: "
        "[Errno 104] Connection reset by peer"
    )


def _read_preface(conn: socket.socket) -> None:
    got = b""
    while len(got) < len(PREFACE) + 9:
        chunk = conn.recv(65536)
        if not chunk:
            return
        got += chunk


def _close_at_once(conn: socket.socket) -> None:
    _read_preface(conn)


def _close_with_streams_open(conn: socket.socket) -> None:
    _read_preface(conn)
    conn.sendall(SettingsFrame(0).serialize() + SettingsFrame(0, flags=["ACK"]).serialize())
    conn.recv(65536)  # the client's requests


def _go_away(conn: socket.socket) -> None:
    _read_preface(conn)
    conn.sendall(SettingsFrame(0).serialize() + GoAwayFrame(0, error_code=11).serialize())
    conn.recv(65536)


def _reset(conn: socket.socket) -> None:
    _read_preface(conn)
    conn.sendall(SettingsFrame(0).serialize())
    conn.recv(65536)
    # SO_LINGER 0: close sends RST, which the client sees as a reset, not an orderly close.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@contextmanager
def raw_server(behave: Callable[[socket.socket], None]) -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                behave(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        thread.join(timeout=30)


_CALM = {"protocol": "HTTP/2", "value": 11, "name": "ENHANCE_YOUR_CALM"}


@pytest.mark.parametrize(
    ("behave", "error", "code"),
    [
        (_close_at_once, "server closed the connection before its first SETTINGS frame", None),
        (
            _close_with_streams_open,
            "server closed the connection with the trial's streams open",
            None,
        ),
        (_go_away, "server sent GOAWAY (HTTP/2 ENHANCE_YOUR_CALM 0xb)", _CALM),
        (_reset, "connection lost with the trial's streams open: ConnectionResetError", None),
    ],
)
def test_a_trials_record_says_why_its_connection_ended(
    behave: Callable[[socket.socket], None],
    error: str,
    code: dict[str, object] | None,
    site: Path,
) -> None:
    manifest = site / "manifest.json"
    with raw_server(behave) as port:
        result = run_agent(
            "fetch", f"http://127.0.0.1:{port}/", "--json", "--timeout", "20",
            "--manifest", str(manifest),
        )  # fmt: skip
    record = json.loads(result.stdout)
    assert result.returncode == 1 and not record["ok"]
    assert error in record["error"], record["error"]
    assert record.get("error_code") == code
