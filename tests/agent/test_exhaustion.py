"""No peer can exhaust the server (issue 13): real sockets against a real `serve` process.

Memory is judged against a baseline measured in the same test on the same server (its RSS when
idle), never against an absolute number or a clock."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import SettingsFrame

from agent.frames import CLIENT_PREFACE
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
