"""A server connection's streamed exchanges: the streams its host answers with `Streamed`.

Each gets a `ServerExchange` (agent.server.exchange) and its handler runs as a task. Request
DATA goes to the exchange while its handler reads (credited as it takes it); once the handler
is gone it is acknowledged and dropped, and a body over its limit is refused (413 before the
response began, RST_STREAM(CANCEL) after). What handlers queue leaves through h2 in the
connection's send rounds, one frame per stream per round (`send_round`). This is the
exchanges' `ExchangeLink`; its connection is an `ExchangeCarrier`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial
from typing import Protocol

from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError

from agent.exchange_queues import FrameSender, error_code_name, send_queued_frame
from agent.server.connection_trials import ConnectionTrials
from agent.server.exchange import Body, ExchangeClosed, Header, ServerExchange
from agent.server.handler import Streamed
from agent.server.request import Request

log = logging.getLogger("h2iot.server")


class StreamWire(FrameSender, Protocol):
    """What the exchanges do on the wire, under h2's names (its H2Connection is one); error
    codes are RFC 9113's."""

    def send_headers(
        self, stream_id: int, headers: list[Header], /, end_stream: bool = False
    ) -> None: ...

    def reset_stream(self, stream_id: int, error_code: int = 0, /) -> None:
        """End the stream with `error_code`; NO_ERROR after a complete response only asks the
        peer to stop sending its request body."""
        ...

    def acknowledge_received_data(self, acknowledged_size: int, stream_id: int, /) -> None:
        """The handler took these request bytes: the peer may send as many more."""
        ...

    def increment_flow_control_window(self, increment: int, /) -> None:
        """The connection's credit for bytes refused, not the stream's."""
        ...

    def remote_flow_control_window(self, stream_id: int, /) -> int:
        """How much more of its request body the peer may send on the stream."""
        ...


class ExchangeCarrier(Protocol):
    """What the exchanges ask of their connection."""

    @property
    def conn(self) -> StreamWire: ...

    trials: ConnectionTrials
    peer: str

    def kick(self) -> None:
        """Send what was queued, once this event-loop turn is over."""
        ...

    def progressed(self) -> None:
        """Request body bytes arrived: the connection is not idle."""
        ...


class StreamedExchanges:
    def __init__(self, carrier: ExchangeCarrier) -> None:
        self._carrier = carrier
        # By stream, until their stream closes; those with bytes or an end queued; their
        # handlers' tasks; handler failures so far (logged once) and bodies refused.
        self.by_stream: dict[int, ServerExchange] = {}
        self.sending: dict[int, ServerExchange] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self.handler_failures = 0
        self.bodies_refused = 0

    # from the connection -----------------------------------------------------------------------

    def start(self, request: Request, stream_id: int, streamed: Streamed) -> None:
        exchange = ServerExchange(self, request, stream_id, streamed.body_limit_bytes)
        self.by_stream[stream_id] = exchange
        limit = streamed.body_limit_bytes
        if limit is not None and _content_length(request) > limit:
            # Refused before the handler runs: the body is never read.
            self._refuse_body(exchange, limit)
            exchange.handler_finished()
            return
        task = asyncio.ensure_future(streamed.run(exchange))
        self._tasks.add(task)
        task.add_done_callback(partial(self._handler_finished, exchange))

    def on_data(self, stream_id: int, data: bytes, flow_controlled_bytes: int) -> bool:
        """True when the DATA was an exchange's (taken, or refused); False leaves its credit to
        the connection to give back (a Reply's body, or one its handler left unread)."""
        exchange = self.by_stream.get(stream_id)
        if exchange is None:
            return False
        if exchange.body is Body.READING:
            self._carrier.progressed()
            refused = not exchange.deliver(data, flow_controlled_bytes)
            if refused and self._refuse_body(exchange, exchange.body_limit_bytes or 0):
                self._refused_data(exchange, flow_controlled_bytes)
            return True
        if exchange.body is Body.REFUSED:
            self._refused_data(exchange, flow_controlled_bytes)
            return True
        return False

    def on_body_end(self, stream_id: int) -> None:
        exchange = self.by_stream.get(stream_id)
        if exchange is not None:
            exchange.deliver_end()
            if exchange.closed:
                del self.by_stream[stream_id]

    def on_reset(self, stream_id: int, code_name: str) -> None:
        exchange = self.by_stream.get(stream_id)
        if exchange is not None:
            self._forget(
                exchange, ExchangeClosed(f"the peer reset stream {stream_id} ({code_name})")
            )

    def send_round(self, max_frame: int) -> tuple[int, bool] | None:
        """One DATA frame for each exchange with bytes queued and credit, through h2, and the
        stream's end after its last bytes: the bytes sent and whether any DATA went, or None
        if nothing was sent at all."""
        conn = self._carrier.conn
        sent = 0
        progressed = data_sent = False
        for stream_id, exchange in list(self.sending.items()):
            end = False
            if exchange.buffered_bytes:
                frame = send_queued_frame(
                    conn, stream_id, exchange, max_frame, may_end=exchange.trailers is None
                )
                if frame is None:
                    continue
                frame_bytes, end = frame
                data_sent = progressed = True
                sent += frame_bytes
                if exchange.buffered_bytes:
                    continue
            del self.sending[stream_id]
            if not exchange.end_queued:
                continue
            progressed = True
            if exchange.trailers is not None:
                conn.send_headers(stream_id, exchange.trailers, end_stream=True)
            elif not end:
                conn.send_data(stream_id, b"", end_stream=True)
            self._written(exchange)
        return (sent, data_sent) if progressed else None

    def paced_by_handler(self) -> bool:
        """Some stream is quiet at its handler's pace (a subscription between items)."""
        return any(exchange.paced_by_handler for exchange in self.by_stream.values())

    def close_all(self, reason: str) -> None:
        for exchange in list(self.by_stream.values()):
            exchange.close(ExchangeClosed(f"stream {exchange.stream_id}: {reason}"))
        self.by_stream.clear()
        self.sending.clear()

    # ExchangeLink (agent.server.exchange) ------------------------------------------------------

    def exchange_headers(
        self, exchange: ServerExchange, headers: list[Header], end_stream: bool
    ) -> None:
        self._carrier.conn.send_headers(exchange.stream_id, headers, end_stream=end_stream)
        if end_stream:
            self._written(exchange)
        self._carrier.kick()

    def exchange_queued(self, exchange: ServerExchange) -> None:
        self.sending[exchange.stream_id] = exchange
        self._carrier.kick()

    def exchange_consumed(self, exchange: ServerExchange, flow_controlled_bytes: int) -> None:
        if self.by_stream.get(exchange.stream_id) is exchange:
            self._carrier.conn.acknowledge_received_data(flow_controlled_bytes, exchange.stream_id)
            self._carrier.kick()

    def exchange_reset(self, exchange: ServerExchange, error_code: int) -> None:
        stream_id = exchange.stream_id
        self._reset_stream(stream_id, error_code)
        self._carrier.trials.stream_reset(stream_id)
        code = error_code_name(error_code)
        self._forget(exchange, ExchangeClosed(f"stream {stream_id} was reset ({code})"))
        self._carrier.kick()

    def exchange_refuse_body(self, exchange: ServerExchange, limit_bytes: int) -> None:
        if self.by_stream.get(exchange.stream_id) is exchange:
            self._refuse_body(exchange, limit_bytes)

    # within ------------------------------------------------------------------------------------

    def _handler_finished(self, exchange: ServerExchange, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        exchange.handler_finished()
        error = None if task.cancelled() else task.exception()
        if error is not None and not isinstance(error, ExchangeClosed):
            self._handler_failed(exchange, "raised", error)
        elif (
            exchange.closed
            or exchange.body is Body.REFUSED
            or self.by_stream.get(exchange.stream_id) is not exchange
        ):
            pass  # the stream is over or being refused: the handler had nothing left to do
        elif not exchange.end_queued:
            self._handler_failed(exchange, "returned without ending its stream", None)
        else:
            # The handler is gone: what it left unread gets its credit back, what still
            # arrives is acknowledged and dropped, and once the response is out the stream ends.
            unread = exchange.close_inbox()
            if unread:
                self._carrier.conn.acknowledge_received_data(unread, exchange.stream_id)
            if exchange.response_done:
                self._end_unread_body(exchange)
        self._carrier.kick()

    def _handler_failed(
        self, exchange: ServerExchange, what: str, error: BaseException | None
    ) -> None:
        self.handler_failures += 1
        level = logging.WARNING if self.handler_failures == 1 else logging.DEBUG
        reason = f"{type(error).__name__}: {error}" if error is not None else "no end"
        log.log(
            level,
            "peer %s: the handler of %s %s (stream %d) %s (%s); reset the stream"
            " (further handler failures on this connection are logged at debug level)",
            self._carrier.peer,
            exchange.request.method.decode(errors="replace"),
            exchange.request.path,
            exchange.stream_id,
            what,
            reason,
            exc_info=error,
        )
        if not (exchange.closed or exchange.body is Body.REFUSED):
            self.exchange_reset(exchange, ErrorCodes.INTERNAL_ERROR)

    def _written(self, exchange: ServerExchange) -> None:
        """The exchange's response ended (its last frame is queued for this write)."""
        self._carrier.trials.response_done(exchange.stream_id)
        exchange.written()
        if exchange.closed:
            self.by_stream.pop(exchange.stream_id, None)
        elif exchange.body is Body.DROPPED:
            self._end_unread_body(exchange)

    def _end_unread_body(self, exchange: ServerExchange) -> None:
        """The response is complete and nobody reads the rest of the request: RFC 9113 section
        8.1, RST_STREAM(NO_ERROR) asks the peer to stop sending it."""
        if not exchange.body_ended:
            self._reset_stream(exchange.stream_id, ErrorCodes.NO_ERROR)
        self._forget(exchange, None)

    def _refuse_body(self, exchange: ServerExchange, limit_bytes: int) -> bool:
        """A body over its limit; the handler sees BodyTooLarge from now on. If the response
        has not started: 413, and the rest of the body is refused: its connection credit goes
        back, its stream credit does not, so the peer sends at most the stream's window more;
        once that is spent RST_STREAM(NO_ERROR) stops it (RFC 9113 section 8.1). A body that
        ends first needs no reset (some clients take a reset after a complete response for a
        failure). If the response had started, RST_STREAM(CANCEL) at once. True when refused with
        413 (the rest of the body is then refused as it comes), False when reset."""
        self.bodies_refused += 1
        stream_id = exchange.stream_id
        self.sending.pop(stream_id, None)
        unread = exchange.refused(limit_bytes)
        if exchange.body is Body.DROPPED:
            self.exchange_reset(exchange, ErrorCodes.CANCEL)
            return False
        conn = self._carrier.conn
        if unread:
            conn.increment_flow_control_window(unread)
        headers = [(b":status", b"413"), (b"content-length", b"0")]
        conn.send_headers(stream_id, headers, end_stream=True)
        self._written(exchange)
        self._refused_data(exchange, 0)
        self._carrier.kick()
        return True

    def _refused_data(self, exchange: ServerExchange, flow_controlled_bytes: int) -> None:
        """DATA of a refused body: the connection's credit back, the stream's kept; the reset
        once the peer's stream window is spent."""
        conn = self._carrier.conn
        if flow_controlled_bytes:
            conn.increment_flow_control_window(flow_controlled_bytes)
        stream_id = exchange.stream_id
        if exchange.closed:
            self.by_stream.pop(stream_id, None)
        elif conn.remote_flow_control_window(stream_id) <= 0:
            self._reset_stream(stream_id, ErrorCodes.NO_ERROR)
            self._forget(exchange, None)

    def _forget(self, exchange: ServerExchange, error: ExchangeClosed | None) -> None:
        """The stream is over: the exchange learns it, and the request bytes it held unread
        get their connection credit back."""
        stream_id = exchange.stream_id
        if self.by_stream.get(stream_id) is exchange:
            del self.by_stream[stream_id]
        self.sending.pop(stream_id, None)
        unread = exchange.close(error)
        if unread:
            self._carrier.conn.acknowledge_received_data(unread, stream_id)

    def _reset_stream(self, stream_id: int, code: int) -> None:
        # h2 refuses when it has closed the stream already (both sides ended, a reset crossed).
        with contextlib.suppress(ProtocolError):
            self._carrier.conn.reset_stream(stream_id, code)


def _content_length(request: Request) -> int:
    """The request's declared body length; -1 if it declares none (h2 has checked its form)."""
    value = request.headers.get(b"content-length")
    return int(value) if value is not None else -1
