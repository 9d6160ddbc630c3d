"""The stream workload's server side: one handler that publishes tune items over four
transports on the agent's own HTTP/2 connection.

- SSE: `GET /stream/sse?<subscription>` answers text/event-stream, one event per item (its id
  the sequence number), then an `end` event with the server's counts.
- WebSocket: `CONNECT /stream/ws?<subscription>` with `:protocol websocket` (RFC 8441; the
  handler announces SETTINGS_ENABLE_CONNECT_PROTOCOL), framed by wsproto's post-handshake
  `Connection`: one message per item (text for JSON, binary for CBOR), the counts as a last
  message, then the close handshake (1000). A frame that breaks RFC 6455 gets close 1002.
- gRPC: `POST /h2iot.stream.Telemetry/Subscribe`, server streaming, framed here rather than by
  grpclib: grpclib would run its own h2 connection beside the agent's, so neither the trial's
  HTTP/2 settings nor its accounting (frames, bytes, the trial header, the serve window) would
  apply to it, and the study is about exactly those. gRPC's part on top of HTTP/2 is small
  (the 5-byte message prefix, `grpc-status` trailers: agent.workloads.stream.grpcwire) and the
  messages are protobuf through the `protobuf` package, whose pure-Python wheel installs on
  armv7l nodes, where grpcio has none. grpcio (the C core) is the interop peer in the tests.
- poll: `GET /stream/poll?<subscription>` answers the latest item of a publication running on
  the server's wall clock (item k due at k / rate_hz since the epoch), with no state kept
  between polls.

Each push subscription runs its own publisher (agent.workloads.stream.publish) under the
server's backpressure policy, so a subscriber that stops reading costs at most about
`buffer_bytes` plus an item of memory (drop) or holds up only its own publisher (block).
A subscriber that goes away ends its publisher quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage
from wsproto.frame_protocol import CloseReason

from agent.errors import ExchangeClosed, UsageError
from agent.server.exchange import ServerExchange
from agent.server.handler import NOT_FOUND, SERVER_HEADER, Handler, Reply, Streamed
from agent.server.request import Request
from agent.workloads.spec import ParamError
from agent.workloads.stream import grpcwire, proto
from agent.workloads.stream.errors import GrpcStatusError, ItemError
from agent.workloads.stream.item import (
    DoublePool,
    Encoding,
    Tune,
    encode_end,
    encode_item,
    sse_data,
)
from agent.workloads.stream.publish import Publisher
from agent.workloads.stream.schedule import Backpressure
from agent.workloads.stream.spec import STREAM
from agent.workloads.stream.sse import CONTENT_TYPE as SSE_CONTENT_TYPE
from agent.workloads.stream.sse import encode_event
from agent.workloads.stream.subscription import (
    POLL_PATH,
    SSE_PATH,
    WEBSOCKET_PATH,
    Subscription,
    parse_query,
)

log = logging.getLogger("h2iot.stream")

# A SubscribeRequest is three numbers: anything near this is not one.
MAX_REQUEST_BYTES = 4096
# After its close frame, how long the server waits for the client's before it resets.
CLOSE_GRACE_S = 2.0
_CONTENT_TYPES: Mapping[str, bytes] = {"json": b"application/json", "cbor": b"application/cbor"}


def _bad_request(message: str) -> Reply:
    body = memoryview(f"{message}\n".encode())
    return Reply(400, ((b"content-type", b"text/plain; charset=utf-8"), SERVER_HEADER), body)


class StreamHandler:
    extra_settings: Mapping[str, int] = {"enable_connect_protocol": 1}

    def __init__(self, backpressure: Backpressure, buffer_bytes: int) -> None:
        self.publisher = Publisher(DoublePool(), backpressure, buffer_bytes)
        self._routes: Mapping[
            str, tuple[bytes, Callable[[Request, Subscription], Reply | Streamed]]
        ]
        self._routes = {
            SSE_PATH: (b"GET", self._sse_call),
            POLL_PATH: (b"GET", self._poll),
            WEBSOCKET_PATH: (b"CONNECT", self._websocket_call),
        }

    def handle(self, request: Request) -> Reply | Streamed:
        path, _, query = request.path.partition("?")
        if path == proto.SUBSCRIBE_PATH:
            return self._grpc_call(request)
        route = self._routes.get(path)
        if route is None:
            return NOT_FOUND
        method, answer = route
        if request.method != method:
            return Reply(405, ((b"allow", method),))
        try:
            subscription = parse_query(query)
        except ParamError as exc:
            return _bad_request(f"{path}: {exc}")
        return answer(request, subscription)

    def _sse_call(self, request: Request, subscription: Subscription) -> Streamed:
        return Streamed(lambda exchange: self._sse(exchange, subscription))

    def _websocket_call(self, request: Request, subscription: Subscription) -> Reply | Streamed:
        if request.headers.get(b":protocol") != b"websocket":
            return _bad_request(f"{WEBSOCKET_PATH}: an extended CONNECT with :protocol websocket")
        if request.headers.get(b"sec-websocket-version") != b"13":
            return Reply(426, ((b"sec-websocket-version", b"13"),))
        return Streamed(lambda exchange: self._websocket(exchange, subscription))

    def _grpc_call(self, request: Request) -> Reply | Streamed:
        if request.method != b"POST":
            return Reply(405, ((b"allow", b"POST"),))
        if not request.headers.get(b"content-type", b"").startswith(grpcwire.CONTENT_TYPE):
            return Reply(415)
        return Streamed(self._grpc)

    # poll --------------------------------------------------------------------------------------

    def _poll(self, request: Request, subscription: Subscription) -> Reply:
        encoding = _item_encoding(subscription)
        now_ns = time.time_ns()
        seq = math.floor(now_ns * subscription.rate_hz / 1e9)
        # Float rounding at a period's edge must not date an item after the poll.
        published_ns = min(now_ns, math.ceil(seq * 1e9 / subscription.rate_hz))
        item = self.publisher.pool.item(seq, published_ns, 0, subscription.payload_doubles)
        body = memoryview(encode_item(item, encoding))
        return Reply(200, ((b"content-type", _CONTENT_TYPES[encoding]), SERVER_HEADER), body)

    # SSE ---------------------------------------------------------------------------------------

    async def _sse(self, exchange: ServerExchange, subscription: Subscription) -> None:
        encoding = _item_encoding(subscription)

        def frame(item: Tune) -> bytes:
            data = sse_data(encode_item(item, encoding), encoding)
            return encode_event(data, event_id=str(item.seq))

        exchange.send_headers(
            200,
            ((b"content-type", SSE_CONTENT_TYPE), (b"cache-control", b"no-store"), SERVER_HEADER),
        )
        with contextlib.suppress(ExchangeClosed):
            end = await self.publisher.run(exchange, subscription, frame)
            data = sse_data(encode_end(end, encoding), encoding)
            exchange.send(encode_event(data, event="end"), end_stream=True)

    # WebSocket ---------------------------------------------------------------------------------

    async def _websocket(self, exchange: ServerExchange, subscription: Subscription) -> None:
        encoding = _item_encoding(subscription)
        ws = Connection(ConnectionType.SERVER)

        def message(body: bytes) -> bytes:
            event = TextMessage(body.decode()) if encoding == "json" else BytesMessage(body)
            return ws.send(event)

        exchange.send_headers(200, (SERVER_HEADER,))
        publisher = asyncio.ensure_future(
            self.publisher.run(
                exchange, subscription, lambda item: message(encode_item(item, encoding))
            )
        )
        reader = asyncio.ensure_future(_read_websocket(exchange, ws))
        try:
            await asyncio.wait((publisher, reader), return_when=asyncio.FIRST_COMPLETED)
            if (
                publisher.done()
                and publisher.exception() is None
                and ws.state is ConnectionState.OPEN
            ):
                closing = message(encode_end(publisher.result(), encoding))
                exchange.send(closing + ws.send(CloseConnection(CloseReason.NORMAL_CLOSURE)))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(reader), CLOSE_GRACE_S)
            if not exchange.closed and not exchange.end_queued:
                exchange.send(b"", end_stream=True)
            if not reader.done():
                await exchange.drain(0)
                exchange.reset(0)  # NO_ERROR: the response is complete, stop sending
        except ExchangeClosed:
            pass
        finally:
            for task in (publisher, reader):
                task.cancel()
            await asyncio.gather(publisher, reader, return_exceptions=True)

    # gRPC --------------------------------------------------------------------------------------

    async def _grpc(self, exchange: ServerExchange) -> None:
        try:
            subscription = await _grpc_subscription(exchange)
        except GrpcStatusError as exc:
            exchange.send_headers(200, _grpc_status(exc.code, str(exc)), end_stream=True)
            await exchange.drain(0)
            exchange.reset(0)  # NO_ERROR: answered; the rest of the request is not wanted
            return
        except ExchangeClosed:
            return
        exchange.send_headers(200, ((b"content-type", grpcwire.CONTENT_TYPE), SERVER_HEADER))
        with contextlib.suppress(ExchangeClosed):
            end = await self.publisher.run(
                exchange,
                subscription,
                lambda item: grpcwire.frame_message(proto.encode_tune(item)),
            )
            exchange.send_trailers(
                (
                    *_grpc_status(grpcwire.Status.OK, ""),
                    (proto.TRAILER_PUBLISHED, str(end.published).encode()),
                    (proto.TRAILER_DROPPED, str(end.dropped).encode()),
                )
            )


def _item_encoding(subscription: Subscription) -> Encoding:
    return "cbor" if subscription.encoding == "cbor" else "json"


def _grpc_status(code: int, message: str) -> tuple[tuple[bytes, bytes], ...]:
    headers = [(b"content-type", grpcwire.CONTENT_TYPE), (b"grpc-status", str(code).encode())]
    if message:
        headers.append((b"grpc-message", grpcwire.encode_grpc_message(message)))
    return tuple(headers)


async def _grpc_subscription(exchange: ServerExchange) -> Subscription:
    """The call's one request message; GrpcStatusError with the status it deserves."""
    reader = grpcwire.MessageReader(MAX_REQUEST_BYTES)
    while True:
        chunk = await exchange.receive()
        if chunk is None:
            raise GrpcStatusError(grpcwire.Status.INTERNAL, "the call ended without a request")
        messages = reader.feed(chunk)
        if messages:
            break
    try:
        return proto.decode_subscription(messages[0])
    except ItemError as exc:
        raise GrpcStatusError(grpcwire.Status.INTERNAL, str(exc)) from None
    except ParamError as exc:
        raise GrpcStatusError(grpcwire.Status.INVALID_ARGUMENT, str(exc)) from None


async def _read_websocket(exchange: ServerExchange, ws: Connection) -> None:
    """The client's side of a WebSocket: pings answered, messages read and let go, a close
    answered; a frame that breaks the protocol closes it with 1002. Returns when the
    WebSocket is closed."""
    while ws.state is not ConnectionState.CLOSED:
        chunk = await exchange.receive()
        if chunk is None:
            return
        ws.receive_data(chunk)
        for event in ws.events():
            if isinstance(event, Ping):
                exchange.send(ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                if ws.state is ConnectionState.REMOTE_CLOSING:
                    exchange.send(ws.send(event.response()), end_stream=True)
                elif ws.state is ConnectionState.OPEN:  # a frame wsproto refused
                    log.info("websocket %s: %s", exchange.stream_id, event.reason)
                    exchange.send(
                        ws.send(CloseConnection(event.code, event.reason)), end_stream=True
                    )
                    return
            elif isinstance(event, Message):
                pass  # the client has nothing to say; its messages are read and dropped


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    if root is not None:
        raise UsageError("--root is for the page workload; stream serves no files")
    policy: Backpressure = "block" if params["backpressure"] == "block" else "drop"
    buffer_bytes = STREAM.param("buffer_bytes").check(params["buffer_bytes"])
    return StreamHandler(policy, int(buffer_bytes))
