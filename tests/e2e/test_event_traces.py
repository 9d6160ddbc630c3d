"""Event traces end to end (`[run] events = true`): a local sweep's run holds each trial's
traces from both nodes in events/, read back with the tests' own JSON-SEQ reader, on both
engines: over HTTP/2 both nodes' frames agree with the row's frame counters and mirror each
other (nghttp/nghttpd's frame logs as our agent's frames), over HTTP/3 qh3's datagram events
with the row's datagrams and ngtcp2's own qlog as gtlsclient and gtlsserver wrote it; a trace
past run.events_max_bytes is cut and says so."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from agent.h2.trace import NAMESPACE
from agent.qlog import CUT_EVENT
from tests.conftest import require_tool, swept_ok
from tests.qlog_reader import read_json_seq

SMALL = ("--set", "run.idle_baseline_s=1", "--set", "run.repetitions=1", "--set", "run.events=true")


def _sweep(tmp_path: Path, config: str, *extra: str) -> tuple[Path, list[dict[str, str]]]:
    return swept_ok(config, tmp_path / "runs", *SMALL, *extra)


def _events(run: Path, row: dict[str, str], role: str = "client") -> list[dict[str, object]]:
    header, events = read_json_seq(
        (run / "events" / f"{row['trial_id']}.{role}.sqlog").read_bytes()
    )
    assert header["trace"]["vantage_point"]["type"] == role
    return events


def _frames(events: list[dict[str, object]]) -> collections.Counter[tuple[object, object]]:
    return collections.Counter(
        (event["name"], event["data"]["frame_type"])  # type: ignore[index]
        for event in events
    )


def test_h2c_traces_hold_every_frame_the_row_counts(tmp_path: Path) -> None:
    run, rows = _sweep(
        tmp_path, "local.toml",
        "--set", "workload.total_bytes=300000", "--set", "sweep.initial_window_size=[1024, 65535]",
    )  # fmt: skip
    assert len(rows) == 2
    for row in rows:
        events = _events(run, row)
        times = [float(str(event["time"])) for event in events]
        assert times == sorted(times) and times[0] >= 0
        frames = _frames(events)
        assert frames[(f"{NAMESPACE}:frame_received", "data")] == int(row["client_data_frames"])
        assert frames[(f"{NAMESPACE}:frame_sent", "window_update")] == int(
            row["client_window_update_frames"]
        )
        served = _frames(_events(run, row, "server"))
        assert served[(f"{NAMESPACE}:frame_sent", "data")] == int(row["server_data_frames"])
        assert served[(f"{NAMESPACE}:frame_received", "window_update")] == int(
            row["client_window_update_frames"]
        )


@pytest.mark.parametrize("engine", ["builtin", "nghttp2"])
def test_h3_toml_traced_gives_every_row_both_nodes_traces(tmp_path: Path, engine: str) -> None:
    """The issue's done-when run, scaled down: configs/h3.toml (h2 and h3) with run.events on
    either engine; every ok row has the client's and the server's trace, each of its kind."""
    if engine == "nghttp2":
        require_tool("nghttp", "nghttpd", "gtlsclient", "gtlsserver")
    run, rows = _sweep(
        tmp_path, "h3.toml",
        "--set", "workload.total_bytes=300000", "--set", "sweep.initial_window_size=[4096, 65535]",
        "--set", f"nodes.client.engine={engine}", "--set", f"nodes.server.engine={engine}",
    )  # fmt: skip
    assert {row["protocol"] for row in rows} == {"h2", "h3"} and len(rows) == 4
    assert len(list((run / "events").iterdir())) == 2 * len(rows)
    for row in rows:
        client, server = _events(run, row), _events(run, row, "server")
        if row["protocol"] == "h2":
            _check_h2_mirrored(row, client, server)
        elif engine == "builtin":
            _check_qh3(row, client, server)
        else:
            _check_ngtcp2(run, row)


def _check_h2_mirrored(
    row: dict[str, str], client: list[dict[str, object]], server: list[dict[str, object]]
) -> None:
    """Each end's frames are the other's, sent for received (nghttp2's and ours alike)."""
    frames, served = _frames(client), _frames(server)
    resources = int(row["page_resource_count"])
    assert frames[(f"{NAMESPACE}:frame_sent", "headers")] == resources
    assert frames[(f"{NAMESPACE}:frame_received", "data")] >= resources
    for (name, frame_type), count in frames.items():
        mirrored = name.replace("received", "?").replace("sent", "received").replace("?", "sent")
        assert served[(mirrored, frame_type)] == count, (name, frame_type)


def _check_qh3(
    row: dict[str, str], client: list[dict[str, object]], server: list[dict[str, object]]
) -> None:
    names = collections.Counter(str(event["name"]) for event in client)
    assert names["transport:datagrams_received"] == int(row["client_datagrams_received"])
    assert names["http:frame_parsed"] > 0
    served = collections.Counter(str(event["name"]) for event in server)
    # What the client received the server sent (and maybe more it never read, its close).
    assert served["transport:datagrams_sent"] >= int(row["client_datagrams_received"])
    assert served["http:frame_created"] >= int(row["page_resource_count"])


def _check_ngtcp2(run: Path, row: dict[str, str]) -> None:
    """gtlsclient's and gtlsserver's own qlog of the trial's connection, as ngtcp2 wrote it."""
    for role in ("client", "server"):
        header, events = read_json_seq(
            (run / "events" / f"{row['trial_id']}.{role}.sqlog").read_bytes()
        )
        assert header["trace"]["vantage_point"] == {"name": "ngtcp2", "type": role}
        names = collections.Counter(str(event["name"]) for event in events)
        assert names["transport:packet_sent"] > 0 and names["transport:packet_received"] > 0


def test_a_trace_past_the_limit_is_cut_and_says_so(tmp_path: Path) -> None:
    run, rows = _sweep(
        tmp_path, "local.toml",
        "--set", "workload.total_bytes=300000", "--set", "sweep.initial_window_size=[1024]",
        "--set", "run.events_max_bytes=8192",
    )  # fmt: skip
    (row,) = rows
    path = run / "events" / f"{row['trial_id']}.client.sqlog"
    assert path.stat().st_size <= 8192
    events = _events(run, row)
    assert events[-1]["name"] == CUT_EVENT
    assert events[-1]["data"]["events_dropped"] > 0  # type: ignore[index]
