"""The stream workload's pure cores, exhaustively: item encodings (JSON, CBOR, protobuf) and
their refusals, SSE framing and parsing over every way a stream can be cut, gRPC message
framing and its bounds, grpc-message escaping, the publish schedule and backpressure verdicts,
sequence gaps and latency statistics."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
from array import array

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.workloads.stream.errors import GrpcStatusError, ItemError, SubscriptionError
from agent.workloads.stream.grpcwire import (
    MessageReader,
    Status,
    decode_grpc_message,
    encode_grpc_message,
    frame_message,
)
from agent.workloads.stream.item import (
    DoublePool,
    StreamEnd,
    Tune,
    decode_item,
    decode_message,
    encode_end,
    encode_item,
    sse_body,
    sse_data,
)
from agent.workloads.stream.proto import (
    decode_subscription,
    decode_tune,
    encode_subscription,
    encode_tune,
)
from agent.workloads.stream.publish import Publisher
from agent.workloads.stream.schedule import Schedule, Verdict, verdict
from agent.workloads.stream.spec import STREAM
from agent.workloads.stream.sse import Event, SseError, SseParser, encode_event
from agent.workloads.stream.subscription import Subscription, parse_query
from agent.workloads.stream.tally import Reception, SequenceTally, nearest_rank, summarise

finite = st.floats(allow_nan=False, allow_infinity=False)
counts = st.integers(0, 2**53)
tunes = st.builds(
    Tune,
    seq=counts,
    t_publish_ns=st.integers(0, 2**63 - 1),
    value=finite,
    error=finite,
    dropped=counts,
    doubles=st.lists(finite, max_size=50).map(lambda xs: array("d", xs)),
)


def cuts(data: bytes, points: list[int]) -> list[bytes]:
    """`data` cut at the given points (any order, repeats allowed)."""
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]


# Items -----------------------------------------------------------------------------------------


@given(tunes, st.sampled_from(["json", "cbor"]))
def test_an_item_survives_its_encoding(item: Tune, encoding: str) -> None:
    body = encode_item(item, encoding)  # type: ignore[arg-type]
    assert decode_message(body, encoding) == item  # type: ignore[arg-type]
    assert decode_item(sse_body(sse_data(body, encoding), encoding), encoding) == item  # type: ignore[arg-type]


@given(tunes)
def test_an_item_survives_protobuf(item: Tune) -> None:
    assert decode_tune(encode_tune(item)) == item


def test_json_items_are_one_line_for_sse() -> None:
    item = DoublePool().item(3, 10**18, 2, 100)
    text = sse_data(encode_item(item, "json"), "json")
    assert "\n" not in text and "\r" not in text
    assert json.loads(text)["doubles"] == item.doubles.tolist()


@given(counts, counts, st.sampled_from(["json", "cbor"]))
def test_the_streams_end_survives_its_encoding(published: int, dropped: int, enc: str) -> None:
    end = StreamEnd(published, dropped)
    assert decode_message(encode_end(end, enc), enc) == end  # type: ignore[arg-type]


def test_the_pool_gives_each_item_the_asked_count_and_different_values() -> None:
    pool = DoublePool()
    first, second = pool.item(0, 1, 0, 1000), pool.item(1, 2, 0, 1000)
    assert len(first.doubles) == len(second.doubles) == 1000
    assert first.doubles != second.doubles
    assert all(0.0 <= x < 1.0 for x in first.doubles)
    assert pool.item(0, 1, 0, 1000) == first  # deterministic per sequence number
    assert len(pool.item(7, 1, 0, 0).doubles) == 0


@given(st.integers(0, 5000), st.integers(0, 10**6))
def test_a_reserved_pool_draws_nothing_more_for_items_of_that_size(
    payload_doubles: int, seq: int
) -> None:
    pool, fresh = DoublePool(), DoublePool()
    pool.reserve(payload_doubles)
    drawn = pool._doubles.tolist()
    item = pool.item(seq, 1, 0, payload_doubles)
    assert pool._doubles.tolist() == drawn
    assert item == fresh.item(seq, 1, 0, payload_doubles)  # the same items either way


def test_the_publisher_reserves_the_payload_before_its_timeline_starts() -> None:
    """The first subscription to a larger payload draws its doubles before the first item is
    due, not while publishing it (2M doubles took ~0.5 s inside the first probe of a search)."""

    class WatchedPool(DoublePool):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def reserve(self, payload_doubles: int) -> None:
            self.calls.append(f"reserve {payload_doubles}")
            super().reserve(payload_doubles)

        def item(self, seq: int, t_publish_ns: int, dropped: int, count: int) -> Tune:
            self.calls.append(f"item {seq}")
            return super().item(seq, t_publish_ns, dropped, count)

    class Sink:
        buffered_bytes = 0

        def send(self, data: bytes | memoryview, end_stream: bool = False) -> None:
            pass

        async def drain(self, low_water_bytes: int = 0) -> None:
            pass

    pool = WatchedPool()
    publisher = Publisher(pool, "drop", 1 << 20)
    end = asyncio.run(
        publisher.run(Sink(), Subscription(100.0, 3000, 0.02, "json"), lambda item: b"")
    )
    assert end == StreamEnd(2, 0)
    assert pool.calls == ["reserve 3000", "item 0", "item 1"]


@pytest.mark.parametrize(
    ("body", "encoding", "message"),
    [
        (b"{", "json", "not a json item"),
        (b"[1]", "json", "a json item must be a map, got list"),
        (b'{"seq":-1}', "json", "an item: 'seq' must be an integer in 0..2^64-1, got -1"),
        (b'{"seq":true}', "json", "an item: 'seq' must be an integer in 0..2^64-1, got True"),
        (
            b'{"seq":4,"t_ns":1,"value":"x","error":0,"dropped":0,"doubles":[]}',
            "json",
            "item 4: 'value' must be a number, got 'x'",
        ),
        (
            b'{"seq":4,"t_ns":1,"value":1,"error":0,"dropped":0,"doubles":[1,"a"]}',
            "json",
            "item 4: 'doubles' must be a list of numbers",
        ),
        (
            b'{"seq":4,"t_ns":1,"value":1,"error":0,"dropped":0,"doubles":{}}',
            "json",
            "item 4: 'doubles' must be a list of numbers",
        ),
        (b'{"published":3}', "json", "the stream's end: 'dropped' must be an integer"),
        (b"\xff", "cbor", "not a cbor item"),
        (cbor2.dumps("x"), "cbor", "a cbor item must be a map, got str"),
    ],
)
def test_a_bad_item_is_refused_naming_the_field(body: bytes, encoding: str, message: str) -> None:
    with pytest.raises(ItemError, match=f"^{re.escape(message)}"):
        decode_message(body, encoding)  # type: ignore[arg-type]


def test_a_poll_answer_must_be_an_item() -> None:
    with pytest.raises(ItemError, match="expected an item, got the stream's end"):
        decode_item(encode_end(StreamEnd(1, 0), "json"), "json")


def test_cbor_in_sse_must_be_base64() -> None:
    with pytest.raises(ItemError, match="SSE data is not base64"):
        sse_body("not base64!", "cbor")


def test_a_protobuf_that_does_not_parse_is_an_item_error() -> None:
    with pytest.raises(ItemError, match="not a protobuf Tune"):
        decode_tune(b"\x0a\xff")


@given(
    st.floats(0.01, 1e4),
    st.integers(0, 2_000_000),
    st.floats(0.01, 86_400),
    st.sampled_from(["json", "cbor"]),
)
def test_a_subscription_survives_protobuf_and_its_query(
    rate: float, doubles: int, duration: float, encoding: str
) -> None:
    asked = Subscription(rate, doubles, duration, encoding)  # type: ignore[arg-type]
    assert decode_subscription(encode_subscription(asked)) == Subscription(
        rate, doubles, duration, "protobuf"
    )
    assert parse_query(asked.query()) == asked


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("rate_hz=1&duration_s=1", "payload_doubles: missing from the subscription's query"),
        ("rate_hz=0&payload_doubles=1&duration_s=1", "rate_hz: 0.0 is outside 0.01..10000"),
        ("rate_hz=1&payload_doubles=x&duration_s=1", "payload_doubles: expected an integer"),
        ("rate_hz=1&payload_doubles=1&duration_s=1&encoding=xml", "encoding: expected one of"),
    ],
)
def test_a_bad_query_names_the_param(query: str, message: str) -> None:
    with pytest.raises(SubscriptionError, match=f"^{message}") as caught:
        parse_query(query)
    assert caught.value.param == message.split(":", maxsplit=1)[0]


def test_a_grpc_subscription_out_of_range_names_the_param() -> None:
    wire = encode_subscription(Subscription(1.0, 3_000_000, 1.0, "protobuf"))
    with pytest.raises(
        SubscriptionError, match=r"^payload_doubles: 3000000 is outside 0\.\.2000000"
    ):
        decode_subscription(wire)


def test_the_item_bound_holds_for_the_widest_doubles() -> None:
    pool = DoublePool()
    item = pool.item(1, 2**63 - 1, 2**40, 1000)
    widest = Tune(
        item.seq,
        item.t_publish_ns,
        -1.2345678901234567e-308,
        -1e-300,
        item.dropped,
        array("d", [-1.2345678901234567e-308] * 1000),
    )
    bound = Subscription(1.0, 1000, 1.0, "json").max_item_bytes
    assert len(encode_item(widest, "json")) <= bound
    assert len(sse_data(encode_item(widest, "cbor"), "cbor")) <= bound
    assert len(encode_tune(widest)) <= bound


# SSE -------------------------------------------------------------------------------------------

sse_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
one_line = sse_text.filter(lambda s: "\n" not in s and "\r" not in s)
events = st.builds(
    Event,
    data=sse_text.filter(bool),
    event=one_line.filter(bool),
    id=one_line.filter(lambda s: "\0" not in s),
)


def normalised(data: str) -> str:
    return data.replace("\r\n", "\n").replace("\r", "\n")


@given(st.lists(events, max_size=6), st.lists(st.integers(0, 10**4), max_size=12), st.booleans())
def test_sse_events_survive_framing_and_any_cut(
    sent: list[Event], points: list[int], bom: bool
) -> None:
    wire = (b"\xef\xbb\xbf" if bom else b"") + b"".join(
        encode_event(e.data, e.event, e.id) for e in sent
    )
    parser = SseParser(max_event_bytes=10**6)
    got = [event for chunk in cuts(wire, points) for event in parser.feed(chunk)]
    assert got == [Event(normalised(e.data), e.event, e.id) for e in sent]


@given(st.sampled_from([b"\n", b"\r", b"\r\n"]), st.lists(st.integers(0, 200), max_size=8))
def test_sse_takes_every_line_ending_comments_and_unknown_fields(
    eol: bytes, points: list[int]
) -> None:
    lines = [b": a comment", b"retry: 10", b"data:no space", b"data:  two spaces", b"bogus: x"]
    lines += [b"", b"data", b"", b"event: end", b"id: 7", b"data: {}", b"", b""]
    lines += [b"data: last", b"", b""]
    wire = eol.join(lines)
    parser = SseParser(max_event_bytes=1000)
    got = [event for chunk in cuts(wire, points) for event in parser.feed(chunk)]
    assert got == [
        Event("no space\n two spaces"),
        Event(""),  # a bare `data` line is data, empty: dispatched
        Event("{}", "end", "7"),
        Event("last", "message", "7"),  # the id stays until another sets it
    ]


def test_a_cr_at_the_end_waits_for_the_next_chunk() -> None:
    parser = SseParser(max_event_bytes=100)
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\r\n") == [Event("a")]


def test_an_event_without_data_is_not_dispatched() -> None:
    assert SseParser(100).feed(b"event: end\n\n: only a comment\n\n") == []


def test_an_endless_event_is_refused_at_the_bound() -> None:
    parser = SseParser(max_event_bytes=64)
    parser.feed(b"data: " + b"x" * 40 + b"\n")
    with pytest.raises(SseError, match="an SSE event longer than 64 bytes"):
        parser.feed(b"data: " + b"y" * 30)


def test_a_line_without_an_end_is_held_up_to_the_bound_only() -> None:
    parser = SseParser(max_event_bytes=1000)
    for _ in range(9):
        parser.feed(b"z" * 100)
    with pytest.raises(SseError):
        parser.feed(b"z" * 101)


def test_sse_lines_must_be_utf8() -> None:
    with pytest.raises(SseError, match="not UTF-8"):
        SseParser(100).feed(b"data: \xff\n")


def test_an_event_field_must_be_one_line() -> None:
    with pytest.raises(ValueError, match="must be one line"):
        encode_event("x", event="a\nb")


@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=6))
def test_any_bytes_parse_or_fail_as_sse_errors(wire: bytes, points: list[int]) -> None:
    parser = SseParser(max_event_bytes=128)
    try:
        for chunk in cuts(wire, points):
            for event in parser.feed(chunk):
                assert event.data or event.data == ""
    except SseError:
        pass


# gRPC framing ----------------------------------------------------------------------------------


@given(st.lists(st.binary(max_size=40), max_size=8), st.lists(st.integers(0, 500), max_size=10))
def test_grpc_messages_survive_framing_and_any_cut(
    messages: list[bytes], points: list[int]
) -> None:
    wire = b"".join(frame_message(m) for m in messages)
    reader = MessageReader(max_message_bytes=40)
    got = [m for chunk in cuts(wire, points) for m in reader.feed(chunk)]
    assert got == messages
    assert not reader.partial


def test_a_five_byte_message_is_a_message_not_a_prefix() -> None:
    reader = MessageReader(100)
    assert reader.feed(frame_message(b"12345") + frame_message(b"")) == [b"12345", b""]


def test_a_cut_message_is_partial() -> None:
    reader = MessageReader(100)
    assert reader.feed(frame_message(b"abcdef")[:3]) == []
    assert reader.partial
    assert reader.feed(frame_message(b"abcdef")[3:7]) == []
    assert reader.partial


def test_an_oversize_message_is_refused_from_its_prefix_alone() -> None:
    reader = MessageReader(max_message_bytes=1000)
    message = "RESOURCE_EXHAUSTED: gRPC message of 1001 bytes, more than the 1000 allowed"
    with pytest.raises(GrpcStatusError, match=message) as caught:
        reader.feed(b"\x00\x00\x00\x03\xe9")
    assert caught.value.code == Status.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    ("prefix", "message"),
    [(b"\x01\x00\x00\x00\x01", "compressed gRPC message"), (b"\x02\x00\x00\x00\x01", "flag 0x02")],
)
def test_a_compressed_or_unknown_flag_is_internal(prefix: bytes, message: str) -> None:
    with pytest.raises(GrpcStatusError, match=message) as caught:
        MessageReader(100).feed(prefix + b"x")
    assert caught.value.code == Status.INTERNAL


@given(st.text())
def test_grpc_message_escaping_round_trips_in_printable_ascii(text: str) -> None:
    wire = encode_grpc_message(text)
    assert all(0x20 <= b <= 0x7E for b in wire)
    assert decode_grpc_message(wire) == text.encode(errors="replace").decode(errors="replace")


@given(st.binary())
def test_grpc_message_decoding_never_fails(value: bytes) -> None:
    decode_grpc_message(value)


def test_a_malformed_escape_stays_as_it_is() -> None:
    assert decode_grpc_message(b"100%%zz %4") == "100%%zz %4"
    assert decode_grpc_message(b"a%20b%25") == "a b%"


# Schedule and backpressure ---------------------------------------------------------------------


@given(st.floats(0.01, 1e4), st.floats(0.01, 1e4))
def test_the_schedule_publishes_what_is_due_within_the_duration(
    rate: float, duration: float
) -> None:
    schedule = Schedule(rate, duration)
    last = schedule.items - 1
    assert schedule.items >= 1
    assert schedule.due_s(last) < duration + 1e-6 or last == 0
    assert schedule.due_s(schedule.items) >= duration - 1e-6


def test_a_rounding_error_adds_no_item() -> None:
    assert Schedule(10.0, 0.3).items == 3
    assert Schedule(3.0, 1.0).items == 3
    assert Schedule(0.5, 1.0).items == 1


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_the_bound_decides_and_the_policy_what_happens_past_it(buffered: int, bound: int) -> None:
    drop, block = verdict("drop", buffered, bound), verdict("block", buffered, bound)
    if buffered <= bound:
        assert drop == block == Verdict.SEND
    else:
        assert (drop, block) == (Verdict.DROP, Verdict.WAIT)


# Sequence tally and latency --------------------------------------------------------------------


@given(st.lists(st.integers(0, 200), max_size=60), st.integers(0, 300))
def test_gaps_and_repeats_add_up(seqs: list[int], extra: int) -> None:
    tally = SequenceTally()
    new = [s for s in seqs if tally.add(s)]
    assert new == sorted(set(new)) and tally.received == len(new)
    assert tally.repeated == len(seqs) - len(new)
    published = (max(new) + 1 if new else 0) + extra
    assert tally.lost(published) == published - len(new)
    assert tally.lost() == (max(new) + 1 - len(new) if new else 0)


def test_polling_counts_from_the_first_item_it_got() -> None:
    tally = SequenceTally(first_seq=None)
    for seq in (1000, 1000, 1002, 1003, 1003):
        tally.add(seq)
    assert (tally.received, tally.repeated, tally.lost(), tally.lost(99)) == (3, 2, 1, 1)


def test_nothing_received_loses_everything_published() -> None:
    assert SequenceTally().lost(5) == 5
    assert SequenceTally().lost() == 0


@given(st.lists(st.floats(0, 1e3), min_size=1, max_size=300))
def test_latency_summary_is_ordered_and_ranked(latencies: list[float]) -> None:
    summary = summarise(latencies)
    assert summary is not None
    ordered = sorted(latencies)
    assert ordered[0] <= summary.p50_s <= summary.p99_s <= summary.max_s == ordered[-1]
    assert ordered[0] - 1e-9 <= summary.mean_s <= ordered[-1] + 1e-9
    for value, fraction in ((summary.p50_s, 0.5), (summary.p99_s, 0.99)):
        at_or_below = sum(x <= value for x in ordered)
        assert at_or_below >= fraction * len(ordered) - 1e-9
        assert sum(x < value for x in ordered) < fraction * len(ordered) + 1e-9


def test_nearest_rank_by_hand() -> None:
    values = [float(x) for x in range(1, 101)]
    assert (nearest_rank(values, 0.5), nearest_rank(values, 0.99)) == (50.0, 99.0)
    assert nearest_rank([7.0], 0.99) == 7.0
    assert summarise([]) is None
    assert math.isclose(summarise([1.0, 2.0, 6.0]).mean_s, 3.0)  # type: ignore[union-attr]


def test_a_reception_adds_up_to_the_records_fields() -> None:
    pool = DoublePool()
    reception = Reception(payload_doubles=3)
    for seq, late_ns in ((0, 1_000_000), (1, 3_000_000), (1, 9), (3, 2_000_000)):
        item = pool.item(seq, 10**18 + seq, seq // 2, 3)
        reception.item(item, 100, item.t_publish_ns + late_ns)
    reception.ended(StreamEnd(published=5, dropped=2))
    metrics = reception.metrics(10.0, 0.5)
    assert metrics == {
        "demanded_rate_hz": 10.0,
        "received_rate_hz": 6.0,
        "items_published": 5,
        "items_received": 3,
        "items_dropped": 2,
        "items_lost": 2,
        "items_repeated": 1,
        "latency_mean_s": 0.002,
        "latency_p50_s": 0.002,
        "latency_p99_s": 0.003,
        "latency_max_s": 0.003,
        "payload_bytes": 400,
        "subscription_s": 0.5,
    }
    assert set(metrics) == {field.name for field in STREAM.fields}


def test_a_reception_refuses_the_wrong_payload_and_a_second_end() -> None:
    reception = Reception(payload_doubles=3)
    with pytest.raises(ItemError, match="item 4 carries 2 doubles, 3 were asked for"):
        reception.item(DoublePool().item(4, 0, 0, 2), 10, 0)
    reception.ended(StreamEnd(1, 0))
    with pytest.raises(ItemError, match="a second end"):
        reception.ended(StreamEnd(1, 0))


def test_an_empty_reception_has_no_latency_and_no_rate() -> None:
    metrics = Reception(payload_doubles=0, first_seq=None).metrics(5.0, None)
    assert metrics["latency_p50_s"] is None and metrics["received_rate_hz"] is None
    assert (metrics["items_received"], metrics["items_lost"], metrics["items_published"]) == (
        0,
        0,
        None,
    )
