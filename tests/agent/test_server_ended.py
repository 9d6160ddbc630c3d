"""A server connection ends with one line saying why (agent.server.lifecycle.ended_reason, and
agent.server.h3_lifecycle's over HTTP/3), read from a real server's stderr as real peers end
their connections each way: raw peers, nghttp, and our own client over HTTP/2 and HTTP/3."""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hyperframe.frame import GoAwayFrame

from agent.h2.frames import CLIENT_PREFACE
from tests.agent.h3_peers import Credentials, h3_server
from tests.agent.rawpeer import RawPeer
from tests.agent.servers import START_TIMEOUT_S, RunningServer, agent_server, run_agent
from tests.conftest import require_tool

IDLE_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("ended")
    with agent_server(site, tmp, "--idle-timeout", str(IDLE_TIMEOUT_S), verbose=True) as server:
        yield server


ANY_PEER = r"127\.0\.0\.1:\d+"


def _ended_lines(server: RunningServer, pattern: str, count: int) -> list[str]:
    """What the server said about the end of each connection whose peer matches `pattern`,
    once it has said it of at least `count`."""
    line = re.compile(rf"peer {pattern}: connection ended: (.*)$", re.MULTILINE)
    deadline = time.monotonic() + START_TIMEOUT_S  # a hang guard, not a timing assertion
    while len(said := line.findall(server.stderr())) < count:
        assert time.monotonic() < deadline, server.stderr()
        time.sleep(0.02)
    return said


def _ended(server: RunningServer, pattern: str) -> str:
    return _ended_lines(server, pattern, 1)[0]


def _raw_peer(server: RunningServer) -> tuple[RawPeer, str]:
    peer = RawPeer(server.port)
    return peer, re.escape(f"127.0.0.1:{peer.sock.getsockname()[1]}")


def _open(server: RunningServer) -> tuple[RawPeer, str]:
    peer, address = _raw_peer(server)
    peer.handshake()
    peer.acknowledge_server_settings()
    return peer, address


def _read_to_close(peer: RawPeer) -> None:
    while peer.read_frame() is not None:
        pass
    peer.close()


def _hang_up(peer: RawPeer) -> None:
    """An orderly close: FIN, then what the server still sends read to its end (closing with
    bytes unread would send RST, a reset the server would rightly report as one)."""
    peer.sock.shutdown(socket.SHUT_WR)
    _read_to_close(peer)


def test_a_peer_that_hangs_up_in_the_handshake(server: RunningServer) -> None:
    peer, address = _raw_peer(server)
    peer.send(CLIENT_PREFACE[:10])
    _hang_up(peer)
    said = _ended(server, address)
    assert said == "the peer closed the connection before its preface and first SETTINGS frame"


def test_a_peer_that_hangs_up_without_goaway(server: RunningServer) -> None:
    peer, address = _open(server)
    _hang_up(peer)
    assert _ended(server, address) == "the peer closed the connection while open"


def test_a_peer_that_resets_the_connection(server: RunningServer) -> None:
    peer, address = _open(server)
    # SO_LINGER 0: close sends RST, which the server sees as a reset, not an orderly close.
    peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()
    said = _ended(server, address)
    assert said.startswith("connection lost while open: ConnectionResetError: "), said


def test_a_peers_goaway_names_its_code(server: RunningServer) -> None:
    peer, address = _open(server)
    peer.send(GoAwayFrame(0, error_code=11))
    _read_to_close(peer)
    said = _ended(server, address)
    assert said == "the peer's GOAWAY (HTTP/2 ENHANCE_YOUR_CALM 0xb) ended it, and we closed it"


def test_a_peer_that_breaks_http2_gets_goaway_with_the_code_the_line_names(
    server: RunningServer,
) -> None:
    peer, address = _open(server)
    peer.send(bytes([0, 0, 1, 0x0, 0]) + (0).to_bytes(4, "big") + b"x")  # DATA on stream 0
    goaway = peer.read_until_goaway()
    _read_to_close(peer)
    assert goaway is not None and goaway.error_code == 1
    said = _ended(server, address)
    assert (
        said
        == "it broke HTTP/2 or a limit: our GOAWAY (HTTP/2 PROTOCOL_ERROR 0x1), and we closed it"
    )
    assert re.search(
        rf"peer {address}: .*; sent GOAWAY \(HTTP/2 PROTOCOL_ERROR 0x1\)", server.stderr()
    )


def test_an_idle_peer(server: RunningServer) -> None:
    peer, address = _open(server)
    goaway = peer.read_until_goaway()  # after the idle timeout
    _read_to_close(peer)
    assert goaway is not None and goaway.error_code == 0
    said = _ended(server, address)
    assert said == "idle for the idle timeout: our GOAWAY (HTTP/2 NO_ERROR 0x0), and we closed it"


def test_our_clients_close_after_its_trial(server: RunningServer, site: Path) -> None:
    before = len(_ended_lines(server, ANY_PEER, 0))
    manifest = ["--manifest", str(site / "manifest.json")]  # the trial's connection alone
    result = run_agent("fetch", server.url, *manifest, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    said = _ended_lines(server, ANY_PEER, before + 1)[before:]
    assert said == ["the peer's GOAWAY (HTTP/2 NO_ERROR 0x0) ended it, and we closed it"]


def test_nghttps_close_after_its_fetch(server: RunningServer) -> None:
    require_tool("nghttp")
    before = len(_ended_lines(server, ANY_PEER, 0))
    fetched = subprocess.run(
        ["nghttp", "-n", server.url + "index.html"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert fetched.returncode == 0, fetched.stderr
    said = _ended_lines(server, ANY_PEER, before + 1)[before:]
    assert said == ["the peer's GOAWAY (HTTP/2 NO_ERROR 0x0) ended it, and we closed it"]


def test_an_http3_connection_says_how_qh3_ended_it(
    site: Path, tmp_path: Path, credentials: Credentials
) -> None:
    with h3_server(site, tmp_path, credentials, verbose=True) as server:
        url = f"https://127.0.0.1:{server.port}/"
        ca = ["--ca-file", str(credentials.ca), "--manifest", str(site / "manifest.json")]
        result = run_agent("fetch", url, "--protocol", "h3", *ca, "--json")
        assert result.returncode == 0, result.stdout + result.stderr
        said = _ended(server, ANY_PEER)
    assert said == "closed with trials served: no reason given (QUIC NO_ERROR 0x0)"
