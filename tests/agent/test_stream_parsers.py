"""Every parser of a peer's bytes in the stream workload, fed arbitrary and adversarial bytes
(valid messages truncated, bit-flipped, spliced with huge length fields and deep nesting):
each returns a clean parse or raises its documented error, one of the workload's own
(agent.workloads.stream.errors), and never anything else: what a peer sends is a refusal or
a failed trial, not a crashed handler or a traceback."""

from __future__ import annotations

import contextlib

import cbor2
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Event, Ping, Pong, TextMessage

from agent.workloads.stream import grpcwire
from agent.workloads.stream.errors import GrpcStatusError, ItemError, SubscriptionError
from agent.workloads.stream.item import (
    MAX_COUNT,
    StreamEnd,
    Tune,
    decode_message,
    encode_end,
    encode_item,
    sse_body,
)
from agent.workloads.stream.proto import (
    decode_subscription,
    decode_tune,
    encode_subscription,
    encode_tune,
)
from agent.workloads.stream.spec import STREAM
from agent.workloads.stream.sse import SseError, SseParser, encode_event
from agent.workloads.stream.subscription import (
    END_EVENT_ID,
    Resumption,
    Subscription,
    parse_query,
    resumption,
)
from agent.workloads.stream.tally import Reception
from agent.workloads.stream.websocket import ServerWebSocket
from tests.agent.test_stream_cores import cuts, tunes

# What a hostile peer splices in: length fields set huge (gRPC's uint32, a protobuf varint,
# CBOR's 64-bit lengths, WebSocket's 64-bit length), nesting past any stack, numbers past any
# double or counter, and bytes that are not UTF-8.
ADVERSARIAL = (
    b"\xff\xff\xff\xff",
    b"\x00\xff\xff\xff\xff",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
    b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\xbb\x7f\xff\xff\xff\xff\xff\xff\xff",
    b"\x5b\x00\x00\x00\x00\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x81\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    b"[" * 5000,
    b'{"a":' * 2000,
    b"\x81" * 1000,
    b"\x23" * 200,
    b"1" + b"0" * 400,
    b"9" * 5000,
    b"\xc2\x58\x40" + b"\xff" * 64,
    b"\xfb\x7f\xf8\x00\x00\x00\x00\x00\x00",
    b"\xff\xfe\xed",
)


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> bytes:
    """A valid message, then a few mutations: cut short, a bit flipped, a byte set, bytes
    inserted or deleted, an adversarial token written over or spliced in."""
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "flip", "set", "insert", "delete", "over", "splice"]))
        at = draw(st.integers(0, len(data)))
        if op == "cut":
            del data[at:]
        elif op == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif op in ("over", "splice"):
            token = draw(st.sampled_from(ADVERSARIAL))
            data[at : at + (len(token) if op == "over" else 0)] = token
    return bytes(data)


def hostile(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(mutated(valid), st.binary(max_size=200), st.sampled_from(ADVERSARIAL))


# Items: JSON and CBOR (SSE, WebSocket, poll), protobuf (gRPC) ---------------------------------

small_tunes = tunes.filter(lambda t: t.seq <= MAX_COUNT and t.dropped <= MAX_COUNT)
ends = st.builds(StreamEnd, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
encodings = st.sampled_from(["json", "cbor"])


def encoded(encoding: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        small_tunes.map(lambda t: encode_item(t, encoding)),  # type: ignore[arg-type]
        ends.map(lambda e: encode_end(e, encoding)),  # type: ignore[arg-type]
    )


def assert_an_item_or_refused(body: bytes, encoding: str) -> None:
    """Decoded and taken in by a subscriber's tally (where a number no clock holds would
    break the arithmetic), or refused as an ItemError."""
    try:
        message = decode_message(body, encoding)  # type: ignore[arg-type]
        if isinstance(message, Tune):
            Reception(len(message.doubles)).item(message, len(body), 0)
    except ItemError:
        pass


@given(st.data(), encodings)
def test_any_item_bytes_decode_or_are_refused(data: st.DataObject, encoding: str) -> None:
    assert_an_item_or_refused(data.draw(hostile(encoded(encoding))), encoding)


FIELDS = b'"t_ns":0,"error":0,"dropped":0'
HUGE = b"1" + b"0" * 400  # an integer no double holds


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (b"[" * 100_000, "json"),  # RecursionError
        (b'{"seq":0,' + FIELDS + b',"value":' + HUGE + b',"doubles":[]}', "json"),  # OverflowError
        (b'{"seq":0,' + FIELDS + b',"value":0,"doubles":[' + HUGE + b"]}", "json"),
        (b'{"seq":0,"t_ns":' + HUGE + b',"value":0,"error":0,"dropped":0,"doubles":[]}', "json"),
        (
            cbor2.dumps(
                {"seq": 0, "t_ns": 0, "value": 10**400, "error": 0, "dropped": 0, "doubles": []}
            ),
            "cbor",
        ),
    ],
    ids=["nesting", "value", "double", "stamp", "cbor-value"],
)
def test_what_used_to_escape_the_item_decoder_is_an_item_error(body: bytes, encoding: str) -> None:
    with pytest.raises(ItemError):
        message = decode_message(body, encoding)  # type: ignore[arg-type]
        assert isinstance(message, Tune)
        Reception(len(message.doubles)).item(message, len(body), 0)


def test_a_number_no_double_or_counter_holds_is_named() -> None:
    fields = {"seq": 0, "t_ns": 0, "value": 0, "error": 0, "dropped": 0, "doubles": []}
    for name, value, message in [
        ("value", 10**400, "item 0: 'value' must be a number within a double's range, got 1"),
        ("doubles", [10**400], "item 0: 'doubles' must be a list of numbers"),
        ("t_ns", 2**64, "item 0: 't_ns' must be an integer in 0..2^64-1, got 18446744073709551616"),
        ("seq", 10**400, "an item: 'seq' must be an integer in 0..2^64-1, got 1000000000"),
    ]:
        body = cbor2.dumps({**fields, name: value})
        try:
            decode_message(body, "cbor")
        except ItemError as exc:
            assert str(exc).startswith(message), exc
            assert len(str(exc)) < 160
        else:
            raise AssertionError(f"{name}={value!r} was taken")


@given(hostile(st.text(max_size=60).map(str.encode)))
def test_any_sse_data_is_base64_or_refused(data: bytes) -> None:
    with contextlib.suppress(ItemError):
        sse_body(data.decode("latin-1"), "cbor")


@given(hostile(small_tunes.map(encode_tune)))
def test_any_tune_bytes_decode_or_are_refused(body: bytes) -> None:
    with contextlib.suppress(ItemError):
        decode_tune(body)


# SSE: the event stream a client reads ---------------------------------------------------------


def event_stream(items: list[Tune]) -> bytes:
    """What the server writes for these items: the first sets the reconnection time."""
    events = [
        encode_event(encode_item(t, "json").decode(), None, str(t.seq), 1000 if not i else None)
        for i, t in enumerate(items)
    ]
    return b"".join(events) + encode_event("{}", "end", END_EVENT_ID, retry_ms=1000)


event_streams = st.lists(small_tunes, max_size=3).map(event_stream)


@given(hostile(event_streams), st.lists(st.integers(0, 5000), max_size=6))
def test_any_event_stream_parses_or_is_refused(wire: bytes, points: list[int]) -> None:
    parser = SseParser(max_event_bytes=2000)
    try:
        for chunk in cuts(wire, points):
            for event in parser.feed(chunk):
                assert_an_item_or_refused(event.data.encode(), "json")
    except SseError:
        pass


# gRPC: length-prefixed messages, the subscription request, the trailers -----------------------

requests = st.builds(
    Subscription,
    st.floats(0.01, 1e4),
    st.integers(0, 2_000_000),
    st.floats(0.01, 86_400),
    st.just("protobuf"),
).map(encode_subscription)


@given(
    hostile(
        st.lists(requests, max_size=3).map(lambda ms: b"".join(map(grpcwire.frame_message, ms)))
    ),
    st.lists(st.integers(0, 500), max_size=6),
)
def test_any_grpc_data_frames_or_is_refused(wire: bytes, points: list[int]) -> None:
    reader = grpcwire.MessageReader(max_message_bytes=64)
    try:
        for chunk in cuts(wire, points):
            assert all(len(m) <= 64 for m in reader.feed(chunk))
    except GrpcStatusError as exc:
        assert exc.code in (grpcwire.Status.INTERNAL, grpcwire.Status.RESOURCE_EXHAUSTED)


@given(hostile(requests))
def test_any_subscribe_request_decodes_in_range_or_is_refused(body: bytes) -> None:
    try:
        asked = decode_subscription(body)
    except (ItemError, SubscriptionError):
        return
    for name in ("rate_hz", "payload_doubles", "duration_s"):
        STREAM.param(name).check(getattr(asked, name))


statuses = st.one_of(st.integers(0, 20).map(lambda c: str(c).encode()), hostile(st.just(b"13")))


@given(statuses, st.binary(max_size=50), st.booleans(), hostile(st.just(b"12345")))
# A percent-decoded newline in grpc-message once made the refusal two lines.
@example(status=b"1", message=b"%0A", trailers_only=False, count=b"")
@example(status=b"1", message=b"\n", trailers_only=False, count=b"")
def test_any_status_or_count_is_read_or_refused(
    status: bytes, message: bytes, trailers_only: bool, count: bytes
) -> None:
    headers = {b"grpc-status": status, b"grpc-message": message, b"h2iot-items-dropped": count}
    for read in (
        lambda: grpcwire.check_status(headers, trailers_only=trailers_only),
        lambda: grpcwire.trailer_count(headers, b"h2iot-items-dropped"),
    ):
        try:
            read()
        except GrpcStatusError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 200


# The subscription's query (SSE, WebSocket, poll) and SSE's Last-Event-ID ---------------------

queries = st.builds(
    Subscription,
    st.floats(0.01, 1e4),
    st.integers(0, 2_000_000),
    st.floats(0.01, 86_400),
    encodings,
).map(lambda s: s.query().encode())


@given(st.one_of(hostile(queries).map(lambda q: q.decode("latin-1")), st.text(max_size=100)))
def test_any_query_is_a_subscription_in_range_or_refused(query: str) -> None:
    try:
        asked = parse_query(query)
    except SubscriptionError as exc:
        assert exc.param in STREAM.param_names
        return
    for name in ("rate_hz", "payload_doubles", "duration_s", "encoding"):
        STREAM.param(name).check(getattr(asked, name))


@given(
    st.one_of(
        st.none(),
        st.integers(0, 10**6).map(lambda k: str(k).encode()),
        hostile(st.sampled_from([b"7", b"end", b"0"])),
    ),
    st.integers(1, 10**6),
)
def test_any_last_event_id_resumes_in_the_subscription_or_is_refused(
    value: bytes | None, items: int
) -> None:
    try:
        resumed = resumption(value, items)
    except SubscriptionError as exc:
        assert exc.param == "Last-Event-ID" and len(str(exc)) < 200
        return
    assert 0 <= resumed.first_seq <= items
    if value is not None and value.strip(b" \t").isdigit():
        assert resumed == Resumption(int(value) + 1)


def test_last_event_id_by_hand() -> None:
    assert resumption(None, 10) == resumption(b"", 10) == Resumption(0)
    assert resumption(b"0", 10) == Resumption(1)
    assert resumption(b" 9 ", 10) == Resumption(10)  # the last item: the end event is next
    assert resumption(b"end", 10) == Resumption(10, ended=True)
    for value in (b"10", b"-1", b"+1", b"1_0", "\u0661".encode(), b"9" * 30, b"End", b"\xff"):
        try:
            resumption(value, 10)
        except SubscriptionError as exc:
            assert str(exc).startswith("Last-Event-ID: ") and "(0..9)" in str(exc)
        else:
            raise AssertionError(f"{value!r} was taken")


# WebSocket: the client's frames as the server reads them --------------------------------------


def client_frames(events: list[str]) -> bytes:
    """What a wsproto client sends for these events, masked as RFC 6455 asks."""
    ws = Connection(ConnectionType.CLIENT)
    made: dict[str, Event] = {
        "text": TextMessage("tune é"),
        "binary": BytesMessage(b"\x00\xff"),
        "ping": Ping(b"p"),
        "pong": Pong(b"q"),
        "close": CloseConnection(1000, "bye"),
    }
    wire = bytearray()
    for name in events:
        wire += ws.send(made[name])
        if name == "close":  # wsproto sends nothing after it
            break
    return bytes(wire)


frames = st.lists(st.sampled_from(["text", "binary", "ping", "pong", "close"]), max_size=6)


@given(
    hostile(frames.map(client_frames)),
    st.lists(st.integers(0, 300), max_size=6),
    st.integers(0, 8),
)
def test_any_client_bytes_leave_the_server_socket_well_behaved(
    wire: bytes, points: list[int], server_closes_at: int
) -> None:
    """Nothing raises; a refusal is 1002 or 1007; the server sends nothing after its own close
    frame (RFC 6455 5.5.1: it used to answer a ping there, and wsproto refused the pong by
    raising); once a chunk ends the stream, the shell reads no more."""
    socket = ServerWebSocket()
    server_closed = False
    for index, chunk in enumerate(cuts(wire, points)):
        if index == server_closes_at and socket.open:
            socket.message(b"{}", text=True)
            socket.close()
            server_closed = True
        received = socket.receive(chunk)
        if received.refused is not None:
            assert received.refused.code in (1002, 1007) and received.end_stream
        if server_closed:
            assert received.data == b""
        if received.end_stream:
            break


def test_the_server_socket_answers_a_ping_and_a_close() -> None:
    socket = ServerWebSocket()
    client = Connection(ConnectionType.CLIENT)
    pong = socket.receive(client.send(Ping(b"x")))
    client.receive_data(pong.data)
    assert [type(e) for e in client.events()] == [Pong]
    closing = socket.receive(client.send(CloseConnection(1000)))
    client.receive_data(closing.data)
    assert closing.end_stream and closing.refused is None and socket.closed
    assert [e.code for e in client.events() if isinstance(e, CloseConnection)] == [1000]


def test_the_server_socket_refuses_text_that_is_not_utf8_with_1007() -> None:
    received = ServerWebSocket().receive(b"\x81\x82\0\0\0\0\xff\xfe")
    client = Connection(ConnectionType.CLIENT)
    client.receive_data(received.data)
    assert received.refused is not None and received.refused.code == 1007
    assert [e.code for e in client.events() if isinstance(e, CloseConnection)] == [1007]


def test_the_server_socket_sends_no_pong_after_its_close() -> None:
    socket = ServerWebSocket()
    socket.close()
    client = Connection(ConnectionType.CLIENT)
    assert socket.receive(client.send(Ping(b"late"))) == socket.receive(b"")
    done = socket.receive(client.send(CloseConnection(1000)))
    assert done.data == b"" and socket.closed and done.refused is None
