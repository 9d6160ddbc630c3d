"""No peer can exhaust the server (issue 13): real sockets against a real `serve` process.

Memory is judged against a baseline measured in the same test on the same server (its RSS when
idle), never against an absolute number or a clock."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import DataFrame, PingFrame, SettingsFrame

from agent.h2.frames import CLIENT_PREFACE
from tests.agent.rawpeer import RawPeer
from tests.agent.servers import RunningServer, agent_server, run_agent

pytestmark = pytest.mark.slow


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(field)


def reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_bytes(b"5")


@pytest.fixture
def blob_server(tmp_path: Path) -> Iterator[RunningServer]:
    with agent_server(None, tmp_path, "--workload", "blob") as running:
        yield running


def blob_trial_ok(server: RunningServer, *extra: str) -> dict[str, object]:
    result = run_agent(
        "trial", server.url, "--json", "--workload", "blob", "--timeout", "30", *extra
    )
    record: dict[str, object] = json.loads(result.stdout)
    assert result.returncode == 0 and record["ok"] is True, record["error"]
    return record


# item 1: a frame longer than SETTINGS_MAX_FRAME_SIZE is refused on its header -------------------

ATTACKERS = 20
DECLARED = 2**24 - 1  # the largest length a frame header can declare: 16 MiB
CHUNK = 1 << 20


def test_oversize_frames_are_refused_on_their_header_and_never_buffered(
    blob_server: RunningServer,
) -> None:
    """20 peers each declare a 16 MiB PING and send all of it but its last byte. Buffering them
    took the server from 24 to 343 MiB; refused on the header, its peak stays near idle."""
    pid = blob_server.process.pid
    blob_trial_ok(blob_server)  # warm: a connection served, the workload's code loaded
    idle_kib = status_kib(pid, "VmRSS")
    reset_peak_rss(pid)
    header = DECLARED.to_bytes(3, "big") + bytes([0x6, 0]) + (0).to_bytes(4, "big")
    peers = [RawPeer(blob_server.port) for _ in range(ATTACKERS)]
    for peer in peers:
        peer.send(CLIENT_PREFACE, SettingsFrame(0), header)
    chunk = b"\0" * CHUNK
    sent = [0] * ATTACKERS
    alive = set(range(ATTACKERS))
    while alive:
        for i in sorted(alive):
            size = min(CHUNK, DECLARED - 1 - sent[i])
            try:
                peers[i].sock.sendall(chunk[:size])
            except OSError:  # the server closed: what it should do
                alive.discard(i)
                continue
            sent[i] += size
            if sent[i] == DECLARED - 1:
                alive.discard(i)
    peak_kib = status_kib(pid, "VmHWM")
    print(f"idle {idle_kib / 1024:.1f} MiB, peak under attack {peak_kib / 1024:.1f} MiB")
    assert peak_kib < 1.5 * idle_kib, (idle_kib, peak_kib)
    goaways = []
    for peer in peers:
        with contextlib.suppress(OSError):
            goaways.append(peer.read_until_goaway())
        peer.close()
    blob_trial_ok(blob_server)
    codes = [g.error_code if g is not None else None for g in goaways]
    assert codes == [ErrorCodes.FRAME_SIZE_ERROR] * ATTACKERS
    # Told on the header: far less than one frame's worth was taken in before the refusal.
    assert max(sent) < DECLARED // 2


# item 2: deadlines, idle connections, the connection cap, the descriptor limit ----------------


def handshake_done(peer: RawPeer) -> None:
    """Preface, SETTINGS, and the server's SETTINGS acknowledged: a connection at rest."""
    peer.handshake()
    peer.acknowledge_server_settings()


def closed_with(peer: RawPeer) -> ErrorCodes | None:
    """The code of the GOAWAY the server sent before closing the connection."""
    goaway = peer.read_until_goaway()
    while peer.read_frame() is not None:
        pass  # the server closes after its GOAWAY
    return None if goaway is None else ErrorCodes(goaway.error_code)


def test_a_peer_that_sends_no_settings_is_closed_at_the_handshake_deadline(
    blob_server: RunningServer,
) -> None:
    """Nothing, a part of the preface, or the whole preface without the SETTINGS frame that
    must follow it (RFC 9113 section 3.4): GOAWAY SETTINGS_TIMEOUT at the deadline. A peer
    that completed its handshake at the same time is still served after it."""
    deadline_s = blob_server.listening["handshake_timeout_s"]
    silent, partial, preface_only, good = (RawPeer(blob_server.port) for _ in range(4))
    partial.send(CLIENT_PREFACE[:10])
    preface_only.send(CLIENT_PREFACE)
    handshake_done(good)
    for peer in (silent, partial, preface_only):
        peer.sock.settimeout(deadline_s + 20)  # a hang guard
        assert closed_with(peer) == ErrorCodes.SETTINGS_TIMEOUT
        peer.close()
    good.get(1, "/blob/1000")
    received = 0
    while received < 1000:
        frame = good.read_frame()
        assert frame is not None, "the server closed a connection that had completed its handshake"
        if isinstance(frame, DataFrame):
            received += len(frame.data)
    good.close()
    log = blob_server.stderr()
    assert log.count("no preface and SETTINGS within") == 3


def test_idle_connections_are_closed_after_the_idle_timeout(tmp_path: Path) -> None:
    """At rest, served and then silent, a response stalled by a window of 0, or kept busy
    with PINGs only: no progress, so GOAWAY NO_ERROR and close. A trial is never idle."""
    with agent_server(None, tmp_path, "--workload", "blob", "--idle-timeout", "1") as server:
        assert server.listening["idle_timeout_s"] == 1.0
        resting, served, stalled, pinging = (RawPeer(server.port) for _ in range(4))
        for peer in (resting, served, pinging):
            handshake_done(peer)
        stalled.handshake({SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        stalled.acknowledge_server_settings()
        served.get(1, "/blob/100")
        stalled.get(1, "/blob/100000")
        # A trial of several requests is not idle while it runs, however long it takes.
        blob_trial_ok(server, "--param", "requests=20", "--param", "size_bytes=1000000")
        pinging.sock.settimeout(0.2)
        goaway = None
        for _ in range(int(30 / 0.2)):  # a hang guard
            pinging.send(PingFrame(0, opaque_data=b"still-up"))
            with contextlib.suppress(TimeoutError):
                goaway = pinging.read_until_goaway()
                break
        assert goaway is not None and goaway.error_code == ErrorCodes.NO_ERROR
        for peer in (resting, served, stalled):
            assert closed_with(peer) == ErrorCodes.NO_ERROR
        for peer in (resting, served, stalled, pinging):
            peer.close()


def test_the_connection_cap_sheds_the_longest_idle_connection_for_a_new_one(
    tmp_path: Path,
) -> None:
    cap = 4
    with agent_server(
        None, tmp_path, "--workload", "blob", "--max-connections", str(cap)
    ) as server:
        assert server.listening["max_connections"] == cap
        peers = []
        for _ in range(cap + 2):
            peer = RawPeer(server.port)
            handshake_done(peer)
            peers.append(peer)
        # The two oldest made room for the two newest.
        assert [closed_with(peer) for peer in peers[:2]] == [ErrorCodes.NO_ERROR] * 2
        blob_trial_ok(server)  # and one more for a normal client
        assert closed_with(peers[2]) == ErrorCodes.NO_ERROR
        for peer in peers:
            peer.close()
        assert "connection cap" in server.stderr()


HOLDERS = 100  # idle connections held open, more than the descriptor limit allows
LOW_LIMIT = 64


def hold_idle_connections(port: int, count: int) -> list[RawPeer]:
    """Connections that complete their handshake, or that the server has not accepted yet,
    and then say nothing."""
    peers = []
    for _ in range(count):
        peer = RawPeer(port)
        peer.handshake()
        peers.append(peer)
    return peers


def test_the_default_cap_is_below_the_descriptor_limit_and_clients_are_served(
    tmp_path: Path,
) -> None:
    with agent_server(None, tmp_path, "--workload", "blob", open_files_limit=LOW_LIMIT) as server:
        holders = hold_idle_connections(server.port, HOLDERS)
        blob_trial_ok(server)
        blob_trial_ok(server, "--param", "mode=concurrent")
        for peer in holders:
            peer.close()
        log = server.stderr()
        assert 0 < server.listening["max_connections"] < LOW_LIMIT
        assert "out of file descriptors" not in log
        assert "out of system resource" not in log


def test_accept_backs_off_at_the_descriptor_limit_with_one_line_per_interval(
    tmp_path: Path,
) -> None:
    """A cap above what the descriptors allow: accept() meets EMFILE, sheds idle connections,
    waits, and says so once per interval while a normal client is still served."""
    with agent_server(
        None,
        tmp_path,
        "--workload", "blob",
        "--max-connections", "1000",
        open_files_limit=LOW_LIMIT,
    ) as server:  # fmt: skip
        started = time.monotonic()
        holders = hold_idle_connections(server.port, HOLDERS)
        blob_trial_ok(server)
        holders += hold_idle_connections(server.port, HOLDERS)
        blob_trial_ok(server)
        elapsed_s = time.monotonic() - started
        for peer in holders:
            peer.close()
        lines = [line for line in server.stderr().splitlines() if "file descriptors" in line]
        assert lines, "EMFILE was never met: the test did not reach the limit"
        interval_s = server.listening["accept_log_interval_s"]
        assert len(lines) <= 1 + elapsed_s / interval_s
        assert "out of system resource" not in server.stderr()
