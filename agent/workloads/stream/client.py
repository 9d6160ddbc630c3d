"""The stream workload's client: one subscription per trial over the chosen transport, every
item decoded and checked (its number of doubles), counted by sequence number, and timed from
its publication (the server's wall clock) to its arrival (ours).

A trial lasts the subscription: the server publishes for duration_s and ends the stream with
its counts (push transports), or the client polls at rate_hz for duration_s. A stream that
breaks mid-way fails the trial with the reason, and its record still has what arrived.
"""

from __future__ import annotations

import asyncio
import time

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.frame_protocol import CloseReason

from agent.client.connect import Target
from agent.client.exchange import ClientExchange
from agent.client.options import PeerClock, RunPlan
from agent.client.response import Response
from agent.client.run import Prepared
from agent.client.trial import TrialSession
from agent.workloads.stream import grpcwire, proto
from agent.workloads.stream.errors import GrpcStatusError, StreamPeerError
from agent.workloads.stream.item import (
    Encoding,
    StreamEnd,
    decode_item,
    decode_message,
    sse_body,
)
from agent.workloads.stream.schedule import Schedule
from agent.workloads.stream.sse import CONTENT_TYPE as SSE_CONTENT_TYPE
from agent.workloads.stream.sse import SseParser
from agent.workloads.stream.subscription import (
    POLL_PATH,
    SSE_PATH,
    WEBSOCKET_PATH,
    Subscription,
)
from agent.workloads.stream.tally import Reception


async def prepare(plan: RunPlan, target: Target) -> Prepared:
    params = plan.params
    encoding: Encoding = "cbor" if params["encoding"] == "cbor" else "json"
    subscription = Subscription(
        rate_hz=float(params["rate_hz"]),
        payload_doubles=int(params["payload_doubles"]),
        duration_s=float(params["duration_s"]),
        encoding=encoding,
    )
    transport = str(params["transport"])
    base = target.path.rstrip("/")
    peer_clock = plan.peer_clock
    return Prepared(params, lambda: StreamDriver(base, transport, subscription, peer_clock))


class StreamDriver:
    def __init__(
        self,
        base_path: str,
        transport: str,
        subscription: Subscription,
        peer_clock: PeerClock | None = None,
    ) -> None:
        """`peer_clock`: the server's wall clock against ours, which the latencies are
        corrected by; None takes the server's publish times as read on ours."""
        self.base_path = base_path
        self.transport = transport
        self.subscription = subscription
        self.encoding: Encoding = "cbor" if subscription.encoding == "cbor" else "json"
        self.peer_clock = peer_clock
        self.reception = Reception(
            subscription.payload_doubles,
            first_seq=None if transport == "poll" else 0,
            peer_offset_ns=0 if peer_clock is None else peer_clock.offset_ns,
        )
        self.responses: list[Response] = []
        self._t_subscribe_ns = 0
        self._t_end_ns = 0

    def _path(self, path: str) -> str:
        return f"{self.base_path}{path}?{self.subscription.query()}"

    async def run(self, session: TrialSession) -> None:
        self._t_subscribe_ns = time.monotonic_ns()
        try:
            if self.transport == "poll":
                await self._poll(session)
            elif self.transport == "sse":
                await self._sse(session)
            elif self.transport == "websocket":
                await self._websocket(session)
            else:
                await self._grpc(session)
        finally:
            self._t_end_ns = time.monotonic_ns()

    def _received(self, body: bytes, t_receive_ns: int) -> None:
        message = decode_message(body, self.encoding)
        if isinstance(message, StreamEnd):
            self.reception.ended(message)
        else:
            self.reception.item(message, len(body), t_receive_ns)

    async def _opened(self, exchange: ClientExchange, content_type: bytes | None) -> Response:
        """The response's head checked: 200 and the transport's content type."""
        status, headers = await exchange.response_head()
        response = Response(exchange.path, exchange.t_request_ns, status=status)
        response.headers = dict(headers)
        self.responses.append(response)
        if status != 200:
            raise StreamPeerError(
                f"{self.transport} subscription {exchange.path} answered {status}"
            )
        got = headers.get(b"content-type", b"")
        if content_type is not None and not got.startswith(content_type):
            raise StreamPeerError(
                f"{self.transport} subscription: content-type {got.decode(errors='replace')!r}, "
                f"expected {content_type.decode()!r}"
            )
        return response

    @staticmethod
    def _ended(response: Response, exchange: ClientExchange) -> None:
        response.t_headers_ns = exchange.t_headers_ns
        response.t_end_ns = exchange.t_end_ns

    # SSE ---------------------------------------------------------------------------------------

    async def _sse(self, session: TrialSession) -> None:
        exchange = session.exchange(
            b"GET", self._path(SSE_PATH), [(b"accept", SSE_CONTENT_TYPE)], end_stream=True
        )
        response = await self._opened(exchange, SSE_CONTENT_TYPE)
        parser = SseParser(max_event_bytes=self.subscription.max_item_bytes)
        while (chunk := await exchange.receive()) is not None:
            response.size_bytes += len(chunk)
            events = parser.feed(chunk)
            now_ns = time.time_ns()
            for event in events:
                self._received(sse_body(event.data, self.encoding), now_ns)
        self._ended(response, exchange)
        self._check_end("the event stream")

    def _check_end(self, what: str) -> None:
        if self.reception.end is None:
            raise StreamPeerError(f"{self.transport}: {what} ended without the server's counts")

    # WebSocket ---------------------------------------------------------------------------------

    async def _websocket(self, session: TrialSession) -> None:
        exchange = session.exchange(
            b"CONNECT",
            self._path(WEBSOCKET_PATH),
            [(b":protocol", b"websocket"), (b"sec-websocket-version", b"13")],
            end_stream=False,
        )
        response = await self._opened(exchange, None)
        ws = Connection(ConnectionType.CLIENT)
        limit = self.subscription.max_item_bytes
        parts: list[bytes] = []
        held = 0
        while ws.state is not ConnectionState.CLOSED:
            chunk = await exchange.receive()
            if chunk is None:
                raise StreamPeerError("websocket: the stream ended before the close handshake")
            response.size_bytes += len(chunk)
            ws.receive_data(chunk)
            for event in ws.events():
                if isinstance(event, TextMessage | BytesMessage):
                    data = (
                        event.data.encode() if isinstance(event, TextMessage) else bytes(event.data)
                    )
                    parts.append(data)
                    held += len(data)
                    if held > limit:
                        exchange.send(
                            ws.send(CloseConnection(CloseReason.MESSAGE_TOO_BIG)), end_stream=True
                        )
                        raise StreamPeerError(f"websocket: a message over {limit} bytes")
                    if event.message_finished:
                        body = b"".join(parts)
                        parts, held = [], 0
                        self._received(body, time.time_ns())
                elif isinstance(event, Ping):
                    exchange.send(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self._websocket_closed(exchange, ws, event)
        # The close handshake is done; the server's END_STREAM follows (RFC 8441 section 6).
        while await exchange.receive() is not None:
            pass
        self._ended(response, exchange)

    def _websocket_closed(
        self, exchange: ClientExchange, ws: Connection, event: CloseConnection
    ) -> None:
        if ws.state is ConnectionState.REMOTE_CLOSING:
            exchange.send(ws.send(event.response()), end_stream=True)
        elif ws.state is ConnectionState.OPEN:  # a frame wsproto refused: close 1002
            exchange.send(ws.send(CloseConnection(event.code, event.reason)), end_stream=True)
            raise StreamPeerError(f"websocket: {event.reason} (closed with {event.code})")
        if event.code != CloseReason.NORMAL_CLOSURE:
            raise StreamPeerError(
                f"websocket: closed by the server with {event.code} {event.reason}"
            )
        self._check_end("the websocket")

    # gRPC --------------------------------------------------------------------------------------

    async def _grpc(self, session: TrialSession) -> None:
        exchange = session.exchange(
            b"POST",
            proto.SUBSCRIBE_PATH,
            [(b"content-type", grpcwire.CONTENT_TYPE), (b"te", b"trailers")],
            end_stream=False,
        )
        exchange.send(
            grpcwire.frame_message(proto.encode_subscription(self.subscription)), end_stream=True
        )
        response = await self._opened(exchange, grpcwire.CONTENT_TYPE)
        grpcwire.check_status(response.headers, trailers_only=True)
        reader = grpcwire.MessageReader(self.subscription.max_item_bytes)
        try:
            while (chunk := await exchange.receive()) is not None:
                response.size_bytes += len(chunk)
                messages = reader.feed(chunk)
                now_ns = time.time_ns()
                for message in messages:
                    self.reception.item(proto.decode_tune(message), len(message), now_ns)
        except GrpcStatusError:
            exchange.reset()  # CANCEL, as a gRPC client does when it gives up on a call
            raise
        self._ended(response, exchange)
        if reader.partial:
            raise GrpcStatusError(
                grpcwire.Status.INTERNAL, "gRPC: the stream ended inside a message"
            )
        trailers = exchange.trailers or {}
        grpcwire.check_status(trailers, trailers_only=False)
        self.reception.ended(
            StreamEnd(
                grpcwire.trailer_count(trailers, proto.TRAILER_PUBLISHED),
                grpcwire.trailer_count(trailers, proto.TRAILER_DROPPED),
            )
        )

    # poll --------------------------------------------------------------------------------------

    async def _poll(self, session: TrialSession) -> None:
        """GET the latest item at rate_hz, one poll after another, until duration_s is over:
        a poll due while the previous one is still out goes as soon as it returns, and polls
        that no longer fit are not made (the received rate shows it), as a push subscription
        keeps its schedule under `drop`."""
        loop = asyncio.get_running_loop()
        schedule = Schedule(self.subscription.rate_hz, self.subscription.duration_s)
        path = self._path(POLL_PATH)
        start = loop.time()
        end = start + schedule.due_s(schedule.items)
        for seq in range(schedule.items):
            delay = start + schedule.due_s(seq) - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif loop.time() >= end:
                break
            response = await session.request(path, keep_body=True)
            now_ns = time.time_ns()
            self.responses.append(response)
            if response.status != 200 or response.body is None:
                raise StreamPeerError(f"poll: GET {path} answered {response.status}")
            body = bytes(response.body)
            self.reception.item(decode_item(body, self.encoding), len(body), now_ns)
        # As a push subscription does: the last item's period ends it, so an on-time
        # subscription lasts duration_s.
        quiet = end - loop.time()
        if quiet > 0:
            await asyncio.sleep(quiet)

    # the record --------------------------------------------------------------------------------

    def metrics(self) -> dict[str, object]:
        span_ns = self._t_end_ns - self._t_subscribe_ns
        return self.reception.metrics(
            self.subscription.rate_hz, span_ns / 1e9 if span_ns > 0 else None
        )

    def extra(self, start_ns: int) -> dict[str, object]:
        clock = self.peer_clock
        return {
            "item_encoding": "protobuf" if self.transport == "grpc" else self.encoding,
            # How the latencies relate the two clocks: "none" (the server's times taken as
            # read: exact on one host only) or "peer_clock_offset" (mapped, within +/- that).
            "latency_clock_correction": "none" if clock is None else "peer_clock_offset",
            "peer_clock_offset_ns": None if clock is None else clock.offset_ns,
            "peer_clock_uncertainty_ns": None if clock is None else clock.uncertainty_ns,
        }
