"""The trace reader's pure core: counts by class from our HTTP/2 frame events (written by the
agent's own qlog writer), from QUIC packets with and without their frames (ngtcp2's and qh3's
shapes), gzip or not; None, not zero, for what a trace cannot tell; one-line errors naming the
file and record; marks placed on the window's clock. Real traces: tests/e2e/test_event_costs.py."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import qlog
from agent.event_trace import trace_name
from agent.h2.frames import FRAME_TYPE_NAMES
from agent.h2.trace import RECEIVED, SENT, FrameEvent
from analysis.errors import RunFormatError
from analysis.qlog_counts import (
    EventCounts,
    client_marks,
    count,
    count_columns,
    marks,
    parse,
    trace_counts,
    window_marks,
)

REFERENCE_MS = 1_796_575_008_668.898


def _trace(
    events: list[dict[str, Any]], role: str = "client", reference: float = REFERENCE_MS
) -> bytes:
    return qlog.encode(
        role, "test", events, {"time_format": "relative", "reference_time": reference}
    )


def _packet(
    direction: str, time: float, packet_type: str = "1RTT", frames: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "time": time,
        "name": f"transport:packet_{direction}",
        "data": {
            "header": {"packet_type": packet_type},
            "frames": [{"frame_type": kind} for kind in frames],
        },
    }


def _datagrams(direction: str, time: float, many: int = 1) -> dict[str, Any]:
    return {"time": time, "name": f"transport:datagrams_{direction}", "data": {"count": many}}


FRAME_CODES = {name.lower(): code for code, name in FRAME_TYPE_NAMES.items()}


@given(
    st.lists(
        st.tuples(st.sampled_from((SENT, RECEIVED)), st.sampled_from(sorted(FRAME_CODES))),
        min_size=1,
        max_size=60,
    )
)
def test_http2_frames_are_counted_by_class_and_direction(frames: list[tuple[str, str]]) -> None:
    events = [
        FrameEvent(1_000 * i, direction, FRAME_CODES[kind], 0, 1, 10).qlog(0)
        for i, (direction, kind) in enumerate(frames)
    ]
    counts = count(parse(_trace(events), "t.sqlog"))
    tally = Counter(frames)
    assert counts == EventCounts(
        data_frames_sent=tally[(SENT, "data")],
        data_frames_received=tally[(RECEIVED, "data")],
        flow_control_frames_sent=tally[(SENT, "window_update")],
        flow_control_frames_received=tally[(RECEIVED, "window_update")],
    )


def test_quic_packets_with_their_frames_give_every_class() -> None:
    events = [
        _packet("sent", 0, "initial", ("crypto", "padding")),
        _packet("received", 5, "initial", ("ack", "crypto")),
        _packet("received", 6, "handshake", ("crypto",)),
        _packet("sent", 7, "handshake", ("ack", "crypto")),
        _packet("received", 9, "1RTT", ("stream",)),
        _packet("sent", 10, "1RTT", ("ack", "max_data", "max_stream_data")),
        {"time": 11, "name": "recovery:metrics_updated", "data": {"smoothed_rtt": 1}},
    ]
    assert count(parse(_trace(events, reference=0), "t.sqlog")) == EventCounts(
        packets_sent=3,
        packets_received=3,
        ack_frames_sent=2,
        ack_frames_received=1,
        flow_control_frames_sent=2,
        flow_control_frames_received=0,
        handshake_packets_sent=2,
        handshake_packets_received=2,
    )


def test_a_stack_that_logs_neither_frames_nor_every_packet_leaves_those_counts_empty() -> None:
    # qh3's shape: packets without frames; of the datagrams received, a packet for the first few.
    events = [
        _datagrams("sent", 0),
        _packet("sent", 0, "initial"),
        _datagrams("received", 4),
        _packet("received", 4, "initial"),
        *(_datagrams("received", 5 + i) for i in range(20)),
        _datagrams("sent", 30, many=2),
        _packet("sent", 30),
        _packet("sent", 30),
    ]
    assert count(parse(_trace(events), "t.sqlog")) == EventCounts(
        packets_sent=3,
        packets_received=None,
        datagrams_sent=3,
        datagrams_received=21,
        handshake_packets_sent=1,
        handshake_packets_received=1,
    )


def test_a_cut_trace_counts_nothing() -> None:
    events = [_packet("sent", i) for i in range(500)]
    data = qlog.encode("client", "t", events, {}, max_bytes=qlog.MIN_MAX_BYTES)
    trace = parse(data, "t.sqlog")
    assert trace.cut
    assert count(trace) == EventCounts()


def test_gzip_reads_as_the_plain_file() -> None:
    data = _trace([_packet("sent", 1, "initial", ("crypto",))])
    assert parse(gzip.compress(data), "t.sqlog.gz") == parse(data, "t.sqlog")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"qlog_format": "JSON"}', "t.sqlog: byte 0: not JSON-SEQ"),
        (b"\x1e{}\n\x1e{not json}\n", "t.sqlog: record 1: not JSON"),
        (b'\x1e{"trace": {}}\n', "t.sqlog: record 0, key trace.vantage_point.type: None"),
        (
            b'\x1e{"trace": {"vantage_point": {"type": "client"}}}\n\x1e{"name": "a:b"}\n',
            "t.sqlog: record 1, key time: None is not a number",
        ),
        (b"\x1e[1]\n", "t.sqlog: record 0: not a JSON object"),
        (b'\x1e{"a": 1}\n\x1e{"b": 2}, {"c": 3}\n', "t.sqlog: record 1: not JSON"),
        (b"\x1f\x8bnot gzip", "t.sqlog: gzip: not a whole gzip stream"),
    ],
)
def test_a_bad_trace_is_one_line_naming_file_and_record(data: bytes, message: str) -> None:
    with pytest.raises(RunFormatError) as raised:
        parse(data, "t.sqlog")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_marks_are_per_class_and_placed_on_the_windows_clock() -> None:
    events = [
        _packet("sent", 1.0, "initial", ("crypto",)),
        _packet("received", 2.0, "1RTT", ("ack", "stream")),
        _packet("sent", 3.0, "1RTT", ("max_stream_data",)),
    ]
    trace = parse(_trace(events), "t.sqlog")
    assert marks(trace) == {
        "Initial/Handshake packet": [0.001],
        "packet received": [0.002],
        "ACK frame received": [0.002],
        "packet sent": [0.003],
        "MAX_(STREAM_)DATA sent": [0.003],
    }
    # The window started 0.5 ms after the trace's time 0, on the client's wall clock.
    start_ns = REFERENCE_MS * 1e6 + 500_000
    placed = window_marks(trace, start_ns)
    assert placed["packet sent"] == pytest.approx([0.0025], abs=1e-6)
    # Without a wall-clock reference (ngtcp2 writes 0), time 0 is the window's start.
    assert window_marks(parse(_trace(events, reference=0), "t"), start_ns) == marks(trace)


def test_a_run_gets_every_roles_counts_and_nan_where_a_trace_is_missing(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    frame = FrameEvent(0, RECEIVED, FRAME_CODES["data"], 0, 1, 10).qlog(0)
    (events / trace_name("t1", "client")).write_bytes(_trace([frame]))
    (events / trace_name("t1", "server")).write_bytes(_trace([frame], role="server"))
    (events / trace_name("t2", "client")).write_bytes(gzip.compress(_trace([frame, frame])))
    columns = trace_counts(tmp_path, ["t1", "t2", "t3"])
    assert set(columns) == {*count_columns("client"), *count_columns("server")}
    assert columns["client_traced_data_frames_received"][:2] == [1.0, 2.0]
    assert math.isnan(columns["client_traced_data_frames_received"][2])
    assert columns["server_traced_data_frames_received"][0] == 1.0
    assert all(math.isnan(v) for v in columns["server_traced_data_frames_received"][1:])
    assert all(math.isnan(v) for v in columns["client_traced_packets_sent"])
    assert trace_counts(tmp_path / "nothing", ["t1"]) == {}
    assert client_marks(tmp_path, "t3", 0) == {}
    assert json.dumps(client_marks(tmp_path, "t2", REFERENCE_MS * 1e6))
