"""Hostile peers get the connection error RFC 9113 prescribes, one log line, and the server
keeps serving everyone else (checked after each attack, and during one)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    HeadersFrame,
    RstStreamFrame,
    WindowUpdateFrame,
)

from tests.agent.rawpeer import RawPeer
from tests.agent.servers import RunningServer, agent_server, run_agent

MAX_FRAME = 131072


@pytest.fixture(scope="module")
def server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    # A large MAX_FRAME_SIZE lets one DATA frame overrun the receive window on its own, so the
    # violation cannot be split across reads (between which the server credits bodies back).
    with agent_server(
        site, tmp_path_factory.mktemp("hostile"), "--setting", f"max_frame_size={MAX_FRAME}"
    ) as running:
        yield running


def bad_preface(peer: RawPeer) -> None:
    peer.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\0" * 30)


def data_on_stream_zero(peer: RawPeer) -> None:
    peer.handshake()
    # hyperframe refuses to build this frame, so it is written by hand: DATA, stream 0.
    peer.send(bytes([0, 0, 1, 0x0, 0]) + (0).to_bytes(4, "big") + b"x")


def flow_control_violation(peer: RawPeer) -> None:
    peer.handshake()
    peer.acknowledge_server_settings()
    peer.get(1, "/", end_stream=False)
    # One frame of 70 000 bytes against the server's 65 535-byte receive window.
    peer.send(DataFrame(1, data=b"x" * 70000))


def window_overflow(peer: RawPeer) -> None:
    peer.handshake()
    peer.send(WindowUpdateFrame(0, window_increment=2**31 - 1))


def continuation_flood(peer: RawPeer) -> None:
    peer.handshake()
    block = peer.header_block("/")
    peer.send(HeadersFrame(1, data=block[:2]))
    peer.send(*(ContinuationFrame(1, data=b"") for _ in range(200)))


def oversize_header_list(peer: RawPeer) -> None:
    peer.handshake()
    extra = [(f"x-filler-{i}", "v" * 4000) for i in range(40)]
    block = peer.header_block("/", extra)
    chunks = [block[i : i + 16000] for i in range(0, len(block), 16000)]
    frames = [HeadersFrame(1, data=chunks[0])]
    frames += [ContinuationFrame(1, data=chunk) for chunk in chunks[1:]]
    frames[-1].flags.add("END_HEADERS")
    frames[0].flags.add("END_STREAM")
    peer.send(*frames)


def oversize_frame(peer: RawPeer) -> None:
    peer.handshake()
    peer.acknowledge_server_settings()
    size = MAX_FRAME + 1
    header = size.to_bytes(3, "big") + bytes([0x1, 0x4]) + (1).to_bytes(4, "big")
    peer.send(header + b"\0" * size)


def reset_storm(peer: RawPeer) -> None:
    peer.handshake()
    for stream_id in range(1, 2 * 300, 2):
        peer.get(stream_id, "/img/photo-1.jpg")
        peer.send(RstStreamFrame(stream_id, error_code=ErrorCodes.CANCEL))


def too_many_streams(peer: RawPeer) -> None:
    # Knowingly: before the client has our SETTINGS, streams over the limit are only refused.
    peer.handshake()
    peer.acknowledge_server_settings()
    for stream_id in range(1, 2 * 102, 2):
        peer.get(stream_id, "/", end_stream=False)


ATTACKS: list[tuple[Callable[[RawPeer], None], ErrorCodes]] = [
    (bad_preface, ErrorCodes.PROTOCOL_ERROR),
    (data_on_stream_zero, ErrorCodes.PROTOCOL_ERROR),
    (flow_control_violation, ErrorCodes.FLOW_CONTROL_ERROR),
    (window_overflow, ErrorCodes.FLOW_CONTROL_ERROR),
    (continuation_flood, ErrorCodes.PROTOCOL_ERROR),
    (oversize_header_list, ErrorCodes.ENHANCE_YOUR_CALM),
    (oversize_frame, ErrorCodes.FRAME_SIZE_ERROR),
    (reset_storm, ErrorCodes.ENHANCE_YOUR_CALM),
    (too_many_streams, ErrorCodes.PROTOCOL_ERROR),
]


def _page_still_served(server: RunningServer, *extra: str) -> dict[str, object]:
    result = run_agent("fetch", server.url, "--json", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    record: dict[str, object] = json.loads(result.stdout)
    assert record["ok"] is True
    return record


@pytest.mark.parametrize(("attack", "code"), ATTACKS, ids=[a.__name__ for a, _ in ATTACKS])
def test_attack_gets_goaway_and_the_server_keeps_serving(
    server: RunningServer, attack: Callable[[RawPeer], None], code: ErrorCodes
) -> None:
    log_lines_before = server.stderr().count("sent GOAWAY")
    peer = RawPeer(server.port)
    # The server may close while the attack is still writing.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        attack(peer)
    goaway = peer.read_until_goaway()
    peer.close()
    assert goaway is not None, "connection closed without GOAWAY"
    assert goaway.error_code == code, f"GOAWAY {ErrorCodes(goaway.error_code)!r}, not {code!r}"
    _page_still_served(server)
    log = server.stderr()
    assert log.count("sent GOAWAY") == log_lines_before + 1
    last = [line for line in log.splitlines() if "sent GOAWAY" in line][-1]
    assert "peer 127.0.0.1:" in last


def test_attacks_do_not_disturb_a_fetch_in_progress(server: RunningServer) -> None:
    outcome: dict[str, object] = {}
    fetch = threading.Thread(
        target=lambda: outcome.update(_page_still_served(server, "--initial-window-size", "256"))
    )
    fetch.start()
    for attack, _code in ATTACKS:
        peer = RawPeer(server.port)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            attack(peer)
            peer.read_until_goaway()
        peer.close()
    fetch.join(timeout=120)
    assert outcome.get("ok") is True
