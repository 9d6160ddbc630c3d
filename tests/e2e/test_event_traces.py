"""Event traces end to end (`[run] events = true`): a local sweep's run holds each trial's
traces in events/, read back with the tests' own JSON-SEQ reader; over HTTP/2 both nodes' frames
agree with the row's frame counters, over HTTP/3 the client's qh3 datagram events with the row's
datagrams; a trace past run.events_max_bytes is cut and says so."""

from __future__ import annotations

import collections
from pathlib import Path

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


def test_h3_traces_hold_qh3s_quic_events(tmp_path: Path) -> None:
    run, rows = _sweep(
        tmp_path, "h3.toml",
        "--set", "workload.total_bytes=300000", "--set", "sweep.initial_window_size=[65535]",
    )  # fmt: skip
    h3 = [row for row in rows if row["protocol"] == "h3"]
    # Every trial's traces from both nodes, the HTTP/3 server's its connection's qh3 events.
    assert len(list((run / "events").iterdir())) == 2 * len(rows)
    for row in h3:
        names = collections.Counter(str(event["name"]) for event in _events(run, row))
        assert names["transport:datagrams_received"] == int(row["client_datagrams_received"])
        assert names["http:frame_parsed"] > 0
        served = collections.Counter(str(e["name"]) for e in _events(run, row, "server"))
        # What the client received the server sent (and maybe more it never read, its close).
        assert served["transport:datagrams_sent"] >= int(row["client_datagrams_received"])
        assert served["http:frame_created"] >= int(row["page_resource_count"])


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


def test_ngtcp2s_own_qlog_is_kept_as_gtlsclient_wrote_it(tmp_path: Path) -> None:
    require_tool("gtlsclient", "gtlsserver")
    run, rows = _sweep(
        tmp_path, "h3.toml",
        "--set", "workload.total_bytes=300000", "--set", "sweep.initial_window_size=[65535]",
        "--set", 'sweep.protocol=["h3"]',
        "--set", "nodes.client.engine=nghttp2", "--set", "nodes.server.engine=nghttp2",
    )  # fmt: skip
    (row,) = rows
    names = collections.Counter(str(event["name"]) for event in _events(run, row))
    assert names["transport:packet_received"] > 0 and names["transport:packet_sent"] > 0
    # gtlsserver's qlog of the trial's connection, as ngtcp2 wrote it.
    header, events = read_json_seq(
        (run / "events" / f"{row['trial_id']}.server.sqlog").read_bytes()
    )
    assert header["trace"]["vantage_point"] == {"name": "ngtcp2", "type": "server"}
    served = collections.Counter(str(event["name"]) for event in events)
    assert served["transport:packet_sent"] > served["transport:packet_received"] > 0


def test_nghttps_frame_log_becomes_the_same_frame_events(tmp_path: Path) -> None:
    require_tool("nghttp", "nghttpd")
    run, rows = _sweep(
        tmp_path, "local.toml",
        "--set", "workload.total_bytes=300000", "--set", "sweep.initial_window_size=[4095]",
        "--set", "nodes.client.engine=nghttp2", "--set", "nodes.server.engine=nghttp2",
    )  # fmt: skip
    (row,) = rows
    frames = _frames(_events(run, row))
    resources = int(row["page_resource_count"])
    assert frames[(f"{NAMESPACE}:frame_sent", "headers")] == resources
    assert frames[(f"{NAMESPACE}:frame_received", "headers")] == resources
    assert frames[(f"{NAMESPACE}:frame_received", "data")] >= resources
    # nghttpd -v's log of the trial's connection: the same frames from the other end.
    served = _frames(_events(run, row, "server"))
    for (name, frame_type), count in frames.items():
        mirrored = name.replace("received", "?").replace("sent", "received").replace("?", "sent")
        assert served[(mirrored, frame_type)] == count, (name, frame_type)
