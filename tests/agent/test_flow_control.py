"""The server never sends beyond the peer's stream or connection window, never beyond its
MAX_FRAME_SIZE, and resumes exactly when WINDOW_UPDATE gives credit back. Checked by a raw peer
that keeps its own books, at tiny windows."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hyperframe.frame import (
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from agent.site import load_manifest
from tests.agent.rawpeer import RawPeer
from tests.agent.servers import RunningServer, agent_server

IMAGE = "img/photo-2.jpg"
INITIAL_WINDOW_SIZE = 0x4
MAX_FRAME_SIZE = 0x5


@pytest.fixture(scope="module")
def server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(site, tmp_path_factory.mktemp("flow")) as running:
        yield running


def _fetch_counting(
    server: RunningServer,
    size_bytes: int,
    stream_window: int,
    connection_window: int,
    max_frame: int = 16384,
    path: str = IMAGE,
) -> tuple[bytes, int]:
    """GET one image, granting credit only when a window is exhausted; returns (body, frames).

    Every DATA frame must fit both windows and MAX_FRAME_SIZE, and (the server's policy, which
    keeps small-window results comparable) use all the credit it has."""
    peer = RawPeer(server.port)
    settings = {INITIAL_WINDOW_SIZE: stream_window, MAX_FRAME_SIZE: max_frame}
    peer.handshake(settings)
    # Bring the connection window from the protocol's 65535 to exactly what the test grants.
    stream_credit, connection_credit = stream_window, 65535
    if connection_window > 65535:
        peer.send(WindowUpdateFrame(0, window_increment=connection_window - 65535))
        connection_credit = connection_window
    peer.get(1, "/" + path)
    body = bytearray()
    frames = 0
    while True:
        frame = peer.read_frame()
        assert frame is not None, "server closed the connection"
        if isinstance(frame, SettingsFrame | HeadersFrame):
            continue
        if not isinstance(frame, DataFrame):
            continue
        size = len(frame.data)
        assert size <= max_frame, f"DATA of {size} bytes > MAX_FRAME_SIZE {max_frame}"
        assert size <= stream_credit, f"DATA of {size} bytes > stream window {stream_credit}"
        assert size <= connection_credit, f"DATA of {size} > connection window {connection_credit}"
        usable = min(stream_credit, connection_credit, max_frame, size_bytes - len(body))
        assert size == usable, f"DATA of {size} bytes while {usable} were allowed"
        stream_credit -= size
        connection_credit -= size
        body += frame.data
        frames += 1
        if "END_STREAM" in frame.flags:
            break
        if stream_credit == 0:
            peer.send(WindowUpdateFrame(1, window_increment=stream_window))
            stream_credit = stream_window
        if connection_credit == 0:
            peer.send(WindowUpdateFrame(0, window_increment=connection_window))
            connection_credit = connection_window
    peer.close()
    return bytes(body), frames


@pytest.mark.parametrize(
    ("path", "stream_window", "connection_window"),
    [
        # One-byte frames are slow to exchange: the tiniest windows fetch the stylesheet.
        ("css/style.css", 1, 65535),
        ("css/style.css", 17, 65535),
        (IMAGE, 256, 65535),
        (IMAGE, 65535, 17),
        (IMAGE, 1 << 20, 1 << 22),
    ],
)
def test_server_stays_inside_both_windows(
    server: RunningServer, site: Path, path: str, stream_window: int, connection_window: int
) -> None:
    expected = load_manifest(site).by_path()[path]
    body, _frames = _fetch_counting(
        server, expected.size_bytes, stream_window, connection_window, path=path
    )
    assert len(body) == expected.size_bytes
    assert hashlib.sha256(body).hexdigest() == expected.sha256


def test_server_splits_data_to_the_peers_max_frame_size(server: RunningServer, site: Path) -> None:
    expected = load_manifest(site).by_path()[IMAGE]
    body, frames = _fetch_counting(server, expected.size_bytes, 1 << 24, 1 << 24)
    assert hashlib.sha256(body).hexdigest() == expected.sha256
    assert frames == -(-expected.size_bytes // 16384)


@pytest.mark.parametrize("server_window", [0, 4096])
def test_a_lowered_stream_window_is_in_force_from_the_clients_acknowledgement(
    site: Path, tmp_path: Path, server_window: int
) -> None:
    """RFC 9113 6.9.3: a client that has not read the server's SETTINGS may send up to the
    protocol's 65,535 on a stream (an upload sent with its request does); once it has
    acknowledged them, the server's own window holds."""
    setting = f"initial_window_size={server_window}"
    with agent_server(site, tmp_path, "--setting", setting) as server:
        early = RawPeer(server.port)
        early.handshake()
        early.send(
            HeadersFrame(1, data=early.header_block("/", method="POST"), flags=["END_HEADERS"]),
            *(DataFrame(1, data=bytes(16384)) for _ in range(3)),
            DataFrame(1, data=bytes(65535 - 3 * 16384), flags=["END_STREAM"]),
        )
        answered = _frames_until_pinged(early)
        early.close()
        late = RawPeer(server.port)
        late.handshake()
        late.acknowledge_server_settings()
        late.send(
            HeadersFrame(1, data=late.header_block("/", method="POST"), flags=["END_HEADERS"]),
            DataFrame(1, data=bytes(server_window + 1), flags=["END_STREAM"]),
        )
        refused = late.read_until_goaway()
        late.close()
    assert not any(isinstance(frame, GoAwayFrame) for frame in answered), answered
    assert any(isinstance(f, HeadersFrame) and f.stream_id == 1 for f in answered)  # answered
    assert isinstance(answered[-1], PingFrame)
    assert refused is not None and refused.error_code == 3  # FLOW_CONTROL_ERROR


def _frames_until_pinged(peer: RawPeer) -> list[object]:
    """Every frame the server sends until it answers a PING sent now (it read all before it)."""
    peer.send(PingFrame(0, opaque_data=b"all read"))
    frames: list[object] = []
    while (frame := peer.read_frame()) is not None:
        frames.append(frame)
        if isinstance(frame, GoAwayFrame) or (
            isinstance(frame, PingFrame) and "ACK" in frame.flags
        ):
            break
    return frames
