"""The stream workload's server side: one handler that publishes tune items over four
transports on the agent's own HTTP/2 connection.

- SSE: `GET /stream/sse?<subscription>` answers text/event-stream: one event per item (its id
  the sequence number; the first also sets the reconnection time, `retry:`), then an `end`
  event with the server's counts, its id END_EVENT_ID. A reconnect carrying Last-Event-ID
  resumes after that item, and one carrying the end's id gets 204, which stops an
  EventSource (agent.workloads.stream.subscription.resumption).
- WebSocket: `CONNECT /stream/ws?<subscription>` with `:protocol websocket` (RFC 8441; the
  handler announces SETTINGS_ENABLE_CONNECT_PROTOCOL), framed by wsproto through
  agent.workloads.stream.websocket: one message per item (text for JSON, binary for CBOR),
  the counts as a last message, then the close handshake (1000). A frame that breaks RFC 6455
  gets close 1002 (1007: text that is not UTF-8).
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

Whatever a client sends is parsed by functions that raise only the workload's own errors
(agent.workloads.stream.errors), so malformed bytes get a refusal, never a failed handler: 400
with the reason in one line, a gRPC status, a WebSocket close. Each is counted and logged at
info level; every answer's head carries the count since the server started (REFUSALS_HEADER).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from agent.errors import ExchangeClosed, UsageError
from agent.server.exchange import ServerExchange
from agent.server.handler import SERVER_HEADER, Handler, Reply, Streamed
from agent.server.request import Request
from agent.workloads.stream import grpcwire, proto
from agent.workloads.stream.errors import GrpcStatusError, ItemError, SubscriptionError
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
    END_EVENT_ID,
    LAST_EVENT_ID,
    POLL_PATH,
    SSE_PATH,
    WEBSOCKET_PATH,
    Subscription,
    parse_query,
    resumption,
)
from agent.workloads.stream.websocket import ServerWebSocket

log = logging.getLogger("h2iot.stream")

# A SubscribeRequest is three numbers: anything near this is not one.
MAX_REQUEST_BYTES = 4096
# After its close frame, how long the server waits for the client's before it resets.
CLOSE_GRACE_S = 2.0
# An EventSource's wait before it reconnects: shorter than browsers' default (about 3 s), so a
# subscription whose connection broke resumes sooner.
RETRY_MS = 1000
REFUSALS_HEADER = b"h2iot-stream-refusals"  # requests refused since the server started
# A refusal's reason quotes the peer's bytes; this much of it is enough to tell what was wrong.
_MAX_REASON_CHARS = 1000
_CONTENT_TYPES: Mapping[str, bytes] = {"json": b"application/json", "cbor": b"application/cbor"}
_TEXT = (b"content-type", b"text/plain; charset=utf-8")


class StreamHandler:
    extra_settings: Mapping[str, int] = {"enable_connect_protocol": 1}

    def __init__(self, backpressure: Backpressure, buffer_bytes: int) -> None:
        self.publisher = Publisher(DoublePool(), backpressure, buffer_bytes)
        self.refusals: Counter[str] = Counter()  # by transport and status or close code
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
            return Reply(404, self._head())
        method, answer = route
        if request.method != method:
            return Reply(405, self._head((b"allow", method)))
        try:
            subscription = parse_query(query)
        except SubscriptionError as exc:
            return self._bad_request(path, str(exc))
        return answer(request, subscription)

    # refusals ----------------------------------------------------------------------------------

    def _refused(self, transport: str, code: int | str, reason: str) -> None:
        self.refusals[f"{transport} {code}"] += 1
        log.info("stream: refused %s with %s: %s", transport, code, reason)

    def _head(self, *headers: tuple[bytes, bytes]) -> tuple[tuple[bytes, bytes], ...]:
        """An answer's headers: these, the server's name and the refusals so far."""
        return (*headers, SERVER_HEADER, (REFUSALS_HEADER, b"%d" % self.refusals.total()))

    def _bad_request(self, path: str, reason: str) -> Reply:
        line = _one_line(f"{path}: {reason}")
        self._refused(path, 400, line)
        return Reply(400, self._head(_TEXT), memoryview(f"{line}\n".encode()))

    # the transports' requests ------------------------------------------------------------------

    def _sse_call(self, request: Request, subscription: Subscription) -> Reply | Streamed:
        try:
            resumed = resumption(request.headers.get(LAST_EVENT_ID), subscription.items)
        except SubscriptionError as exc:
            return self._bad_request(SSE_PATH, str(exc))
        if resumed.ended:
            return Reply(204, self._head())  # the WHATWG's way to tell an EventSource to stop
        return Streamed(lambda exchange: self._sse(exchange, subscription, resumed.first_seq))

    def _websocket_call(self, request: Request, subscription: Subscription) -> Reply | Streamed:
        if request.headers.get(b":protocol") != b"websocket":
            return self._bad_request(WEBSOCKET_PATH, "an extended CONNECT with :protocol websocket")
        if request.headers.get(b"sec-websocket-version") != b"13":
            return Reply(426, self._head((b"sec-websocket-version", b"13")))
        return Streamed(lambda exchange: self._websocket(exchange, subscription))

    def _grpc_call(self, request: Request) -> Reply | Streamed:
        if request.method != b"POST":
            return Reply(405, self._head((b"allow", b"POST")))
        if not request.headers.get(b"content-type", b"").startswith(grpcwire.CONTENT_TYPE):
            return Reply(415, self._head())
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
        return Reply(200, self._head((b"content-type", _CONTENT_TYPES[encoding])), body)

    # SSE ---------------------------------------------------------------------------------------

    async def _sse(
        self, exchange: ServerExchange, subscription: Subscription, first_seq: int
    ) -> None:
        encoding = _item_encoding(subscription)

        # The reconnection time rides on the first item's event, not ahead of it: bytes queued
        # before the first item would count against buffer_bytes and could drop it. The end
        # event carries it again, for the reconnect after it (which gets 204).
        def frame(item: Tune) -> bytes:
            data = sse_data(encode_item(item, encoding), encoding)
            retry_ms = RETRY_MS if item.seq == first_seq else None
            return encode_event(data, event_id=str(item.seq), retry_ms=retry_ms)

        exchange.send_headers(
            200,
            self._head((b"content-type", SSE_CONTENT_TYPE), (b"cache-control", b"no-store")),
        )
        with contextlib.suppress(ExchangeClosed):
            end = await self.publisher.run(exchange, subscription, frame, first_seq)
            data = sse_data(encode_end(end, encoding), encoding)
            exchange.send(encode_event(data, "end", END_EVENT_ID, RETRY_MS), end_stream=True)

    # WebSocket ---------------------------------------------------------------------------------

    async def _websocket(self, exchange: ServerExchange, subscription: Subscription) -> None:
        encoding = _item_encoding(subscription)
        socket = ServerWebSocket()

        def message(body: bytes) -> bytes:
            return socket.message(body, text=encoding == "json")

        exchange.send_headers(200, self._head())
        publisher = asyncio.ensure_future(
            self.publisher.run(
                exchange, subscription, lambda item: message(encode_item(item, encoding))
            )
        )
        reader = asyncio.ensure_future(self._read_websocket(exchange, socket))
        try:
            await asyncio.wait((publisher, reader), return_when=asyncio.FIRST_COMPLETED)
            if publisher.done() and publisher.exception() is None and socket.open:
                closing = message(encode_end(publisher.result(), encoding))
                exchange.send(closing + socket.close())
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

    async def _read_websocket(self, exchange: ServerExchange, socket: ServerWebSocket) -> None:
        """The client's side of the WebSocket, until the socket is closed, refused or its
        stream ends."""
        while not socket.closed:
            chunk = await exchange.receive()
            if chunk is None:
                return
            received = socket.receive(chunk)
            if received.data or received.end_stream:
                exchange.send(received.data, end_stream=received.end_stream)
            if received.refused is not None:
                self._refused("websocket", received.refused.code, received.refused.reason or "")
            if received.end_stream:
                return

    # gRPC --------------------------------------------------------------------------------------

    async def _grpc(self, exchange: ServerExchange) -> None:
        try:
            subscription = await _grpc_subscription(exchange)
        except GrpcStatusError as exc:
            reason = _one_line(str(exc))
            self._refused("grpc", grpcwire.Status(exc.code).name, reason)
            exchange.send_headers(200, self._head(*_grpc_status(exc.code, reason)), end_stream=True)
            await exchange.drain(0)
            exchange.reset(0)  # NO_ERROR: answered; the rest of the request is not wanted
            return
        except ExchangeClosed:
            return
        exchange.send_headers(200, self._head((b"content-type", grpcwire.CONTENT_TYPE)))
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


def _one_line(reason: str) -> str:
    return reason.replace("\r", " ").replace("\n", " ")[:_MAX_REASON_CHARS]


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
            what = "inside its request message" if reader.partial else "without a request"
            raise GrpcStatusError(grpcwire.Status.INTERNAL, f"the call ended {what}")
        messages = reader.feed(chunk)
        if messages:
            break
    try:
        return proto.decode_subscription(messages[0])
    except ItemError as exc:
        raise GrpcStatusError(grpcwire.Status.INTERNAL, str(exc)) from None
    except SubscriptionError as exc:
        raise GrpcStatusError(grpcwire.Status.INVALID_ARGUMENT, str(exc)) from None


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    if root is not None:
        raise UsageError("--root is for the page workload; stream serves no files")
    policy: Backpressure = "block" if params["backpressure"] == "block" else "drop"
    buffer_bytes = STREAM.param("buffer_bytes").check(params["buffer_bytes"])
    return StreamHandler(policy, int(buffer_bytes))
