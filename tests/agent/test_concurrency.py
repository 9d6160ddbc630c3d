"""Settings the server announces reach the client, and the client honours the server's
MAX_CONCURRENT_STREAMS when it fetches the subresources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
