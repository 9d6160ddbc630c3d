"""The HTTP/2 frame tracer (agent.h2.trace) and the JSON-SEQ qlog writer (agent.qlog), read back
with a reader of the test's own that checks the qlog schema's required fields."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from agent import qlog
from agent.h2.frames import CLIENT_PREFACE, FrameTally
from agent.h2.trace import NAMESPACE, FrameTrace
from tests.qlog_reader import read_json_seq

# (type, flags, stream id, payload length)
_frames = st.lists(
    st.tuples(
        st.integers(0, 255), st.integers(0, 255), st.integers(0, 2**31 - 1), st.integers(0, 300)
    ),
    max_size=30,
)


def _wire(frames: list[tuple[int, int, int, int]]) -> bytes:
    return b"".join(
        length.to_bytes(3, "big")
        + bytes([frame_type, flags])
        + stream_id.to_bytes(4, "big")
        + bytes(length)
        for frame_type, flags, stream_id, length in frames
    )


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(_frames, _frames, st.lists(st.integers(0, 20_000)), st.lists(st.integers(0, 20_000)))
def test_every_frame_appears_once_in_order_with_monotone_times(
    sent: list[tuple[int, int, int, int]],
    received: list[tuple[int, int, int, int]],
    sent_cuts: list[int],
    received_cuts: list[int],
) -> None:
    trace = FrameTrace(client_side=True)
    sent_chunks = _chunks(CLIENT_PREFACE + _wire(sent), sent_cuts)
    received_chunks = _chunks(_wire(received), received_cuts)
    now_ns = 1_000
    # Interleave the directions as a connection does; the clock only moves forward.
    for index in range(max(len(sent_chunks), len(received_chunks))):
        for chunks, feed in ((sent_chunks, trace.sent), (received_chunks, trace.received)):
            if index < len(chunks):
                now_ns += 7
                feed(chunks[index], now_ns)
    for direction, frames in (("sent", sent), ("received", received)):
        seen = [
            (e.frame_type, e.flags, e.stream_id, e.length_bytes)
            for e in trace.events
            if e.direction == direction
        ]
        assert seen == frames
    times = [event.time_ns for event in trace.events]
    assert times == sorted(times)

    data = qlog.encode("client", "t", trace.qlog_events(1_000), {"reference_time": 0})
    _header, events = read_json_seq(data)
    assert len(events) == len(sent) + len(received)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    assert {e["name"] for e in events} <= {f"{NAMESPACE}:frame_sent", f"{NAMESPACE}:frame_received"}


@given(_frames, st.lists(st.integers(0, 20_000)))
def test_its_counts_agree_with_the_frame_tally(
    frames: list[tuple[int, int, int, int]], cuts: list[int]
) -> None:
    trace = FrameTrace(client_side=False)
    tally = FrameTally(expect_preface=True)
    for chunk in _chunks(CLIENT_PREFACE + _wire(frames), cuts):
        trace.received(chunk, 0)
        tally.feed(chunk)
    assert sum(tally.counts().frames.values()) == len(trace.events)


def test_a_trace_past_its_size_limit_is_cut_at_a_record_and_says_so() -> None:
    events = [{"time": float(i), "name": "x:y", "data": {"i": i}} for i in range(1000)]
    data = qlog.encode("server", "t", events, {}, max_bytes=4_000)
    assert len(data) <= 4_000
    _, read = read_json_seq(data)
    cut = read[-1]
    assert cut["name"] == qlog.CUT_EVENT
    assert cut["data"]["events_kept"] == len(read) - 1
    assert cut["data"]["events_kept"] + cut["data"]["events_dropped"] == 1000
    assert read[:-1] == events[: len(read) - 1]


def test_a_trace_within_its_limit_is_whole() -> None:
    events = [{"time": 1.0, "name": "x:y", "data": {}}]
    _, read = read_json_seq(qlog.encode("client", "t", events, {}))
    assert read == events


def test_a_tools_trace_is_kept_as_written_or_cut_at_a_record() -> None:
    events = [{"time": float(i), "name": "transport:packet_sent", "data": {}} for i in range(500)]
    written = qlog.encode("client", "ngtcp2", events, {})
    assert qlog.cut(written, len(written)) == written
    cut = qlog.cut(written, 4_096)
    assert len(cut) <= 4_096
    _, read = read_json_seq(cut)
    assert read[:-1] == events[: len(read) - 1]
    assert read[-1]["name"] == qlog.CUT_EVENT
    assert read[-1]["time"] == read[-2]["time"]
    assert read[-1]["data"]["events_kept"] + read[-1]["data"]["events_dropped"] == 500
