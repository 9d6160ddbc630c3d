"""A client trial's phase boundaries (its record's `phases`) over each protocol against our
server: on the clock its marker's edges are stamped on, in order, the close inside the marker's
window; and none from the nghttp2 engine, which says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.client.record import PHASE_MARKS
from tests.agent.h3_peers import Credentials, h3_server
from tests.agent.servers import agent_server, run_agent


def _trial(url: Path | str, marker: Path, *args: str) -> dict[str, object]:
    result = run_agent("fetch", str(url), "--json", "--marker", f"fifo:{marker}", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    record: dict[str, object] = json.loads(result.stdout)
    assert record["ok"], record["error"]
    return record


def _edges(marker: Path) -> list[tuple[int, int]]:
    return [(int(level), int(at)) for level, at in map(str.split, marker.read_text().splitlines())]


@pytest.mark.parametrize("protocol", ["h2c", "h2", "h3"])
def test_the_phases_are_stamped_in_order_between_the_markers_edges(
    protocol: str, site: Path, credentials: Credentials, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    marker.touch()  # the fifo marker appends its edges to a plain file as well
    keys = ["--cert", str(credentials.cert), "--key", str(credentials.key)]
    ca = ["--ca-file", str(credentials.ca)]
    if protocol == "h3":
        with h3_server(site, tmp_path, credentials) as server:
            record = _trial(f"https://127.0.0.1:{server.port}/", marker, "--protocol", "h3", *ca)
    elif protocol == "h2":
        with agent_server(site, tmp_path, "--tls", *keys) as server:
            record = _trial(f"https://127.0.0.1:{server.port}/", marker, *ca)
    else:
        with agent_server(site, tmp_path) as server:
            record = _trial(server.url, marker)
    phases = record["phases"]
    assert isinstance(phases, dict) and list(phases) == list(PHASE_MARKS)
    # The marker's edges are the ones the meter was told: the same instants.
    assert _edges(marker) == [
        (1, phases["marker_raised_mono_ns"]),
        (0, phases["marker_lowered_mono_ns"]),
    ]
    assert (
        phases["marker_raised_mono_ns"]
        <= record["t_mono_start_ns"]
        <= phases["connect_done_mono_ns"]
        <= phases["first_byte_mono_ns"]  # the page's response headers
        <= phases["exchange_done_mono_ns"]
        <= phases["close_done_mono_ns"]
        <= phases["marker_lowered_mono_ns"]
    )
    # The exchange ends at the trial's last byte, as the record's fetch does.
    assert phases["exchange_done_mono_ns"] == record["t_mono_end_ns"]
    assert record["connect_s"] is not None


def test_a_failed_trial_has_no_phases(site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    marker.touch()
    # Nothing listens on port 9 of the loopback: the trial's connection is refused.
    manifest = site / "manifest.json"
    result = run_agent(
        "fetch", "http://127.0.0.1:9/", "--json", "--manifest", str(manifest),
        "--marker", f"fifo:{marker}",
    )  # fmt: skip
    record = json.loads(result.stdout)
    assert not record["ok"] and "phases" not in record
    assert [level for level, _at in _edges(marker)] == [1, 0]  # the trial did run
