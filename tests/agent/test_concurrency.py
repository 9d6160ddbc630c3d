"""Settings the server announces reach the client, and the client honours the server's
MAX_CONCURRENT_STREAMS when it fetches the subresources; a client that opens more before it
has read them gets the extra streams refused, not its connection closed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hyperframe.frame import GoAwayFrame, HeadersFrame, PingFrame, RstStreamFrame

from tests.agent.rawpeer import RawPeer
from tests.agent.servers import agent_server, run_agent


def _max_overlap(resources: list[dict[str, float]]) -> int:
    edges = sorted(
        [(r["start_s"], 1) for r in resources] + [(r["end_s"], -1) for r in resources],
        key=lambda edge: (edge[0], edge[1]),
    )
    running = peak = 0
    for _time, step in edges:
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize("limit", [1, 3, 100])
def test_client_keeps_within_the_servers_stream_limit(
    site: Path, tmp_path: Path, limit: int
) -> None:
    with agent_server(
        site,
        tmp_path,
        "--setting",
        f"max_concurrent_streams={limit}",
        "--setting",
        "SETTINGS_MAX_FRAME_SIZE=32768",
    ) as server:
        result = run_agent("fetch", server.url, "--json", "--initial-window-size", "16384")
    record = json.loads(result.stdout)
    assert record["ok"] is True, record["error"]
    assert record["peer_settings"]["max_concurrent_streams"] == limit
    assert record["peer_settings"]["max_frame_size"] == 32768
    subresources = record["resources"][1:]
    assert len(subresources) == 7
    overlap = _max_overlap(subresources)
    assert overlap <= limit
    if limit == 100:
        # Unconstrained, the client does fetch concurrently.
        assert overlap > 1


def test_streams_over_the_limit_opened_before_the_settings_arrive_are_refused(
    site: Path, tmp_path: Path
) -> None:
    """RFC 9113 5.1.2: the limit is the server's once the client has it; five GETs sent with the
    preface, against a limit of three, are three answers and two REFUSED_STREAMs (7: retry),
    and the connection serves on."""
    with agent_server(site, tmp_path, "--setting", "max_concurrent_streams=3") as server:
        peer = RawPeer(server.port)
        peer.handshake()
        # In one write, so the server reads all five at once (one by one, an early answer
        # could close a stream before the next arrives, and the fifth would fit).
        flags = ["END_HEADERS", "END_STREAM"]
        peer.send(
            *(
                HeadersFrame(stream_id, data=peer.header_block("/index.html"), flags=flags)
                for stream_id in (1, 3, 5, 7, 9)
            ),
            PingFrame(0, opaque_data=b"all read"),
        )
        frames = []
        while (frame := peer.read_frame()) is not None:
            frames.append(frame)
            if isinstance(frame, PingFrame) and "ACK" in frame.flags:
                break
        peer.get(11, "/index.html")  # after the refusals: served
        while (frame := peer.read_frame()) is not None:
            frames.append(frame)
            if isinstance(frame, HeadersFrame) and frame.stream_id == 11:
                break
        peer.close()
    answered = {f.stream_id for f in frames if isinstance(f, HeadersFrame)}
    refused = {f.stream_id: f.error_code for f in frames if isinstance(f, RstStreamFrame)}
    assert answered == {1, 3, 5, 11}
    assert refused == {7: 7, 9: 7}
    assert not any(isinstance(f, GoAwayFrame) for f in frames)
