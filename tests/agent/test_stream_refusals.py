"""What a subscriber that sends malformed bytes gets from the real stream server, per transport:
a refusal with a one-line reason (HTTP 400, a gRPC status, a WebSocket close 1002/1007),
counted in `h2iot-stream-refusals`, while a subscription already running on the same
connection is served to its end and the server logs no handler failure."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from wsproto.connection import Connection, ConnectionType
from wsproto.events import CloseConnection, TextMessage

from agent.workloads.stream import grpcwire, proto
from agent.workloads.stream.item import StreamEnd, Tune, decode_message
from agent.workloads.stream.subscription import Subscription
from tests.agent.servers import RunningServer, agent_server
from tests.agent.stream_peers.h2_client import H2Client, StreamState
from tests.agent.test_stream_peers import assert_all_items, sse_messages

RATE_HZ = 20.0
ITEMS = 10
GOOD = Subscription(RATE_HZ, 8, ITEMS / RATE_HZ, "json")
REFUSALS = b"h2iot-stream-refusals"
GRPC_HEADERS = [("content-type", "application/grpc"), ("te", "trailers")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(
        None, tmp_path_factory.mktemp("stream-refusals"), "--workload", "stream"
    ) as s:
        yield s


@pytest.fixture
def client(server: RunningServer) -> Iterator[H2Client]:
    client = H2Client(server.port)
    yield client
    client.close()


def refusals(state: StreamState) -> int:
    return int(state.headers[REFUSALS])


def refusals_now(client: H2Client) -> int:
    """The server's count, from the head of a poll answered now."""
    return refusals(answered(client, client.open("GET", f"/stream/poll?{GOOD.query()}")))


def assert_unharmed(server: RunningServer) -> None:
    log = server.stderr()
    assert "Traceback" not in log and "the handler of" not in log, log


def answered(client: H2Client, stream_id: int) -> StreamState:
    state = client.streams[stream_id]
    client.pump(lambda: state.ended or state.reset_code is not None)
    return state


def websocket(client: H2Client, subscription: Subscription) -> int:
    return client.open(
        "CONNECT",
        f"/stream/ws?{subscription.query()}",
        [(":protocol", "websocket"), ("sec-websocket-version", "13")],
        end_stream=False,
    )


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A final client frame under an all-zero mask (the payload goes as it is)."""
    assert len(payload) < 126
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + b"\0\0\0\0" + payload


class WebSocketReader:
    """The client's view of one WebSocket stream: the server's messages and closes."""

    def __init__(self, client: H2Client, stream_id: int) -> None:
        self.client, self.stream_id = client, stream_id
        self.state = client.streams[stream_id]
        self.ws = Connection(ConnectionType.CLIENT)
        self.messages: list[Tune | StreamEnd] = []
        self.closes: list[CloseConnection] = []

    def read(self) -> bool:
        self.ws.receive_data(bytes(self.state.data))
        self.state.data.clear()
        for event in self.ws.events():
            if isinstance(event, TextMessage):
                self.messages.append(decode_message(event.data.encode(), "json"))
            elif isinstance(event, CloseConnection):
                self.closes.append(event)
        return bool(self.closes)

    def until_closed(self) -> CloseConnection:
        self.client.pump(self.read)
        return self.closes[0]


def serve_alongside(client: H2Client, transport: str) -> Callable[[], None]:
    """A good subscription opened now on `client`'s connection; call the result, after the
    misbehaving stream, to read it to its end and check every item arrived."""
    if transport == "websocket":
        reader = WebSocketReader(client, websocket(client, GOOD))

        def finish_websocket() -> None:
            assert reader.until_closed().code == 1000
            client.send_data(reader.stream_id, reader.ws.send(reader.closes[0].response()), True)
            answered(client, reader.stream_id)
            assert_all_items(reader.messages)

        return finish_websocket
    stream_id = client.open("GET", f"/stream/sse?{GOOD.query()}")

    def finish_sse() -> None:
        state = answered(client, stream_id)
        assert state.reset_code is None
        assert_all_items(sse_messages(bytes(state.data)))

    return finish_sse


# SSE and polling: the request's query and headers ----------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers", "reason"),
    [
        (
            f"/stream/sse?{GOOD.query()}",
            [("last-event-id", "not-an-id")],
            "/stream/sse: Last-Event-ID: 'not-an-id' is",
        ),
        (
            f"/stream/sse?{GOOD.query()}",
            [("last-event-id", "9" * 5000)],
            "/stream/sse: Last-Event-ID: '99999",
        ),
        (
            "/stream/sse?rate_hz=1&payload_doubles=" + "1" * 5000 + "&duration_s=1",
            [],
            "/stream/sse: payload_doubles: expected an integer",
        ),
        ("/stream/poll?rate_hz=%ff%fe&payload_doubles=1&duration_s=1", [], "/stream/poll: rate_hz"),
        ("/stream/poll?" + "&".join(["a=b"] * 2000), [], "/stream/poll: rate_hz: missing"),
    ],
)
def test_a_malformed_subscription_request_is_a_counted_400(
    server: RunningServer, client: H2Client, path: str, headers: list[tuple[str, str]], reason: str
) -> None:
    finish = serve_alongside(client, "sse")
    first = answered(client, client.open("GET", path, headers))
    again = answered(client, client.open("GET", path, headers))
    body = bytes(first.data).decode()
    assert first.headers[b":status"] == b"400"
    assert body.startswith(reason) and body.count("\n") == 1 and len(body) <= 1001
    assert refusals(again) == refusals(first) + 1 >= 2
    finish()
    assert_unharmed(server)


# WebSocket: frames that break RFC 6455 -------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (masked_frame(0x1, b"\xff\xfe"), 1007),  # text that is not UTF-8
        (masked_frame(0x3, b""), 1002),  # a reserved opcode
        (masked_frame(0x8, b"\x03"), 1002),  # a close frame with a 1-byte payload
        (b"\x81\x02ok", 1002),  # unmasked: a client must mask
        (b"\x81\xff" + b"\xff" * 8 + b"\0\0\0\0", 1002),  # a length of 2^64 - 1 (MSB set)
        (b"\x89\xfe\x00\x7e" + b"\0" * 130, 1002),  # a ping of 126 bytes (at most 125)
    ],
)
def test_a_malformed_websocket_frame_is_a_counted_close(
    server: RunningServer, client: H2Client, frame: bytes, code: int
) -> None:
    finish = serve_alongside(client, "sse")
    before = refusals_now(client)
    hostile = WebSocketReader(client, websocket(client, Subscription(RATE_HZ, 8, 30.0, "json")))
    client.pump(lambda: b":status" in hostile.state.headers)
    client.send_data(hostile.stream_id, frame)
    assert hostile.until_closed().code == code
    assert answered(client, hostile.stream_id).reset_code in (None, 0)
    finish()
    assert refusals_now(client) == before + 1
    assert f"refused websocket with {code}" in server.stderr()
    assert_unharmed(server)


def test_a_ping_after_the_servers_close_is_left_unanswered(
    server: RunningServer, client: H2Client
) -> None:
    """The server may send nothing after its close frame (RFC 6455 5.5.1): a ping that comes
    before the client's close is read past, and the close handshake still completes (it used
    to fail the handler: the stream was reset with INTERNAL_ERROR)."""
    finish = serve_alongside(client, "websocket")
    reader = WebSocketReader(client, websocket(client, Subscription(RATE_HZ, 8, 0.1, "json")))
    assert reader.until_closed().code == 1000
    client.send_data(reader.stream_id, masked_frame(0x9, b"ping"))
    client.send_data(reader.stream_id, reader.ws.send(reader.closes[0].response()), True)
    state = answered(client, reader.stream_id)
    assert (state.ended, state.reset_code, bytes(state.data)) == (True, None, b"")
    finish()
    assert_unharmed(server)


# gRPC: the length-prefixed request -------------------------------------------------------------

REQUEST = proto.encode_subscription(Subscription(RATE_HZ, 8, 0.5, "protobuf"))
OUT_OF_RANGE = proto.encode_subscription(Subscription(1.0, 3_000_000, 1.0, "protobuf"))


@pytest.mark.parametrize(
    ("wire", "status", "message"),
    [
        (grpcwire.frame_message(REQUEST)[:-3], 13, "the call ended inside its request message"),
        (b"\x00\x00\x00", 13, "the call ended inside its request message"),
        (b"", 13, "the call ended without a request"),
        (b"\x01" + grpcwire.frame_message(REQUEST)[1:], 13, "a compressed gRPC message"),
        (b"\x80\x00\x00\x00\x01\x00", 13, "gRPC message flag 0x80"),
        (b"\x00\xff\xff\xff\xff", 8, "gRPC message of 4294967295 bytes"),
        (grpcwire.frame_message(b"\x09\x01"), 13, "not a protobuf SubscribeRequest"),
        (grpcwire.frame_message(b"\x23" * 1000), 13, "not a protobuf SubscribeRequest"),
        (
            grpcwire.frame_message(OUT_OF_RANGE),
            3,
            "payload_doubles: 3000000 is outside 0..2000000",
        ),
        (grpcwire.frame_message(b""), 3, "rate_hz: 0.0 is outside"),
    ],
)
def test_a_malformed_grpc_request_gets_its_status(
    server: RunningServer, client: H2Client, wire: bytes, status: int, message: str
) -> None:
    finish = serve_alongside(client, "websocket")
    before = refusals_now(client)
    good = client.open("POST", proto.SUBSCRIBE_PATH, GRPC_HEADERS, end_stream=False)
    client.send_data(good, grpcwire.frame_message(REQUEST), end_stream=True)
    hostile = client.open("POST", proto.SUBSCRIBE_PATH, GRPC_HEADERS, end_stream=False)
    client.send_data(hostile, wire, end_stream=True)
    refused = answered(client, hostile)
    assert refused.headers[b"grpc-status"] == str(status).encode()
    assert message in grpcwire.decode_grpc_message(refused.headers[b"grpc-message"])
    served = answered(client, good)
    assert served.trailers[b"grpc-status"] == b"0"
    assert refusals(refused) == before + 1
    reader = grpcwire.MessageReader(4096)
    assert [proto.decode_tune(m).seq for m in reader.feed(bytes(served.data))] == list(range(10))
    finish()
    assert_unharmed(server)
