"""One stream a handler answered with `Streamed`: its request body as it arrives, its response
as the handler produces it.

The exchange holds the stream's state and the handler's waits; its connection (an
`ExchangeLink`, in practice agent.server.connection.ServerConnection) does the HTTP/2 part.
Request DATA is queued here as it arrives and its flow-control credit goes back to the peer
only when `receive()` hands the chunk over, so a handler that stops reading stops the peer.
Response bytes queued by `send` leave as DATA when the connection's send loop has credit for
them, one frame per stream per round like every other response; until then they are
`buffered_bytes`, the handler's to bound (`drain`).

The exchange owns its state; its connection tells it what happened (`handler_finished`,
`refused`, `deliver_end`, `written`) and reads the result. Its response and who takes its
request body are each one state of a table:

    UNSTARTED --headers--> STARTED --end (last DATA, trailers)--> ENDING --written--> WRITTEN
        +----- headers that end the stream (a 413 too) -----------^

    READING --handler done--> DROPPED        (what still arrives is acknowledged and dropped)
       |----- refuse -------> REFUSED        (413 answered; the rest of the body refused)
       +----- cancel -------> DROPPED        (over the limit after the response began: reset)
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from agent.errors import ExchangeClosed, ExchangeStateError
from agent.exchange_queues import QueuedExchange
from agent.server.request import Request
from agent.transitions import TableLifecycle

__all__ = ["BodyTooLarge", "ExchangeClosed", "ExchangeStateError", "ServerExchange"]

Header = tuple[bytes, bytes]


class BodyTooLarge(ExchangeClosed):
    """The request body went over its limit: the connection answered 413 (if the response had
    not started) and refused the rest."""


class Response(enum.Enum):
    UNSTARTED = "unstarted"
    STARTED = "started"  # HEADERS sent
    ENDING = "ending"  # END_STREAM or trailers asked for: nothing more may be queued
    WRITTEN = "written"  # the last frame was handed to the transport


class ResponseInput(enum.Enum):
    HEADERS = "headers"
    HEADERS_END = "headers_end"  # HEADERS with END_STREAM
    END = "end"
    WRITTEN = "written"


_R, _RI = Response, ResponseInput
RESPONSE_TRANSITIONS: Mapping[tuple[Response, ResponseInput], Response] = MappingProxyType(
    {
        (_R.UNSTARTED, _RI.HEADERS): _R.STARTED,
        (_R.UNSTARTED, _RI.HEADERS_END): _R.ENDING,
        (_R.STARTED, _RI.END): _R.ENDING,
        (_R.ENDING, _RI.WRITTEN): _R.WRITTEN,
    }
)


class Body(enum.Enum):
    """Who takes the request body's DATA."""

    READING = "reading"  # queued for the handler, credit back as it reads
    DROPPED = "dropped"  # nobody: acknowledged and dropped (the handler is gone, or reset)
    REFUSED = "refused"  # answered 413: refused, its stream credit kept


class BodyInput(enum.Enum):
    HANDLER_DONE = "handler_done"
    REFUSE = "refuse"  # over its limit before the response began
    CANCEL = "cancel"  # over its limit after the response began


_B, _BI = Body, BodyInput
BODY_TRANSITIONS: Mapping[tuple[Body, BodyInput], Body] = MappingProxyType(
    {
        (_B.READING, _BI.HANDLER_DONE): _B.DROPPED,
        (_B.READING, _BI.REFUSE): _B.REFUSED,
        (_B.READING, _BI.CANCEL): _B.DROPPED,
        # The handler ends after its body was refused or its stream reset.
        (_B.DROPPED, _BI.HANDLER_DONE): _B.DROPPED,
        (_B.REFUSED, _BI.HANDLER_DONE): _B.REFUSED,
    }
)


class ExchangeLink(Protocol):
    """What an exchange asks of its connection."""

    def exchange_headers(
        self, exchange: ServerExchange, headers: list[Header], end_stream: bool
    ) -> None:
        """Send a HEADERS frame now (response headers, or trailers with `end_stream`)."""
        ...

    def exchange_queued(self, exchange: ServerExchange) -> None:
        """Bytes or the stream's end were queued: send them when there is credit."""
        ...

    def exchange_consumed(self, exchange: ServerExchange, flow_controlled_bytes: int) -> None:
        """The handler took a chunk: give its credit back to the peer."""
        ...

    def exchange_reset(self, exchange: ServerExchange, error_code: int) -> None: ...

    def exchange_refuse_body(self, exchange: ServerExchange, limit_bytes: int) -> None:
        """The body is over the limit: 413 if possible, then refuse the rest."""
        ...


class ServerExchange(QueuedExchange):
    def __init__(
        self,
        link: ExchangeLink,
        request: Request,
        stream_id: int,
        body_limit_bytes: int | None = None,
    ) -> None:
        super().__init__()
        self.request = request
        self.stream_id = stream_id
        self.body_limit_bytes = body_limit_bytes
        self.received_bytes = 0  # request body bytes arrived so far (padding excluded)
        self.trailers: list[Header] | None = None
        self.body_ended = False  # the peer's END_STREAM arrived
        self.handler_done = False
        self._body = TableLifecycle(BODY_TRANSITIONS, Body.READING)
        self._response = TableLifecycle(RESPONSE_TRANSITIONS, Response.UNSTARTED)
        self._link = link
        self._error: ExchangeClosed | None = None
        self._closed = asyncio.Event()

    # the handler's side --------------------------------------------------------------------------

    async def receive(self) -> bytes | None:
        """The next chunk of the request body, None after END_STREAM. Its credit goes back to
        the peer now. Raises ExchangeClosed once the stream was reset."""
        while True:
            if self._error is not None:
                raise self._error
            if (data := self._pop_received()) is not None:
                return data
            if self.body_ended:
                return None
            await self._inbox.wait()

    async def read_body(self, limit_bytes: int) -> bytes:
        """The whole request body; over `limit_bytes` the connection answers 413 (if the
        response has not started) and refuses the rest, and this raises BodyTooLarge."""
        chunks: list[bytes] = []
        total = 0
        while (chunk := await self.receive()) is not None:
            total += len(chunk)
            if total > limit_bytes:
                self._link.exchange_refuse_body(self, limit_bytes)
                raise BodyTooLarge(self._too_large(limit_bytes))
            chunks.append(chunk)
        return b"".join(chunks)

    def send_headers(
        self, status: int, headers: Sequence[Header] = (), end_stream: bool = False
    ) -> None:
        self._check_open("send_headers")
        if self.headers_sent:
            raise ExchangeStateError(f"stream {self.stream_id}: response headers sent twice")
        self._response.advance(ResponseInput.HEADERS_END if end_stream else ResponseInput.HEADERS)
        self._link.exchange_headers(
            self, [(b":status", str(status).encode()), *headers], end_stream
        )

    def send(self, data: bytes | memoryview, end_stream: bool = False) -> None:
        """Queue body bytes (not copied: do not change them afterwards); they leave as DATA
        under flow control. Never blocks: bound the queue with `buffered_bytes` / `drain`."""
        self._check_open("send")
        if not self.headers_sent:
            raise ExchangeStateError(f"stream {self.stream_id}: send before send_headers")
        self._queue(data, end_stream)

    def send_trailers(self, headers: Sequence[Header]) -> None:
        """End the stream with these trailers, after the bytes queued so far."""
        self._check_open("send_trailers")
        if not self.headers_sent:
            raise ExchangeStateError(f"stream {self.stream_id}: trailers before send_headers")
        self.trailers = list(headers)
        self._response.advance(ResponseInput.END)
        self._link.exchange_queued(self)

    def reset(self, error_code: int = 8) -> None:
        """RST_STREAM with `error_code` (CANCEL by default); queued bytes are dropped."""
        if not self._closed.is_set():
            self._link.exchange_reset(self, error_code)

    @property
    def paced_by_handler(self) -> bool:
        """The response has started, nothing of it waits to be sent, and the handler is still
        at work: the stream is quiet at the server's own pace (a subscription between items),
        not for want of anything from the peer."""
        return (
            self.headers_sent
            and not self.end_queued
            and not self.handler_done
            and not self.closed
            and self.buffered_bytes == 0
        )

    @property
    def body(self) -> Body:
        return self._body.state

    @property
    def response(self) -> Response:
        return self._response.state

    @property
    def headers_sent(self) -> bool:
        return self._response.state is not Response.UNSTARTED

    @property
    def end_queued(self) -> bool:
        return self._response.state in (Response.ENDING, Response.WRITTEN)

    @property
    def response_done(self) -> bool:
        """The response's last frame went to the transport."""
        return self._response.state is Response.WRITTEN

    def _queue_end(self) -> None:
        self._response.advance(ResponseInput.END)

    @property
    def closed(self) -> bool:
        """Both sides ended, or the stream was reset, or the connection went away."""
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def _check_open(self, what: str) -> None:
        if self._error is not None:
            raise self._error
        if self.end_queued or self._closed.is_set():
            raise ExchangeStateError(f"stream {self.stream_id}: {what} after the response ended")

    def _too_large(self, limit_bytes: int) -> str:
        return f"stream {self.stream_id}: request body over its limit of {limit_bytes} bytes"

    # the connection's side -----------------------------------------------------------------------

    def _credit(self, flow_controlled_bytes: int) -> None:
        self._link.exchange_consumed(self, flow_controlled_bytes)

    def _queued(self) -> None:
        self._link.exchange_queued(self)

    def deliver(self, data: bytes, flow_controlled_bytes: int) -> bool:
        """A DATA frame's payload; False when it takes the body over its limit (the frame is
        not queued: the connection refuses the body)."""
        self.received_bytes += len(data)
        limit = self.body_limit_bytes
        if limit is not None and self.received_bytes > limit:
            return False
        self._inbox.put(data, flow_controlled_bytes)
        return True

    def deliver_end(self) -> None:
        self.body_ended = True
        self._inbox.wake()
        if self.response_done:
            self._closed.set()

    def written(self) -> None:
        """The response's last frame was handed to the transport."""
        self._response.advance(ResponseInput.WRITTEN)
        if self.body_ended:
            self._closed.set()

    def handler_finished(self) -> None:
        """The handler returned, raised, or was never run (its body refused before it): what
        arrives from now on is nobody's."""
        self.handler_done = True
        self._body.advance(BodyInput.HANDLER_DONE)

    def close_inbox(self) -> int:
        """The handler is done: drop what it left unread; returns its flow-controlled bytes."""
        return self._inbox.clear()

    def close(self, error: ExchangeClosed | None) -> int:
        """The stream is over (`error` set: reset or lost). Returns the flow-controlled bytes
        received and never handed to the handler, whose credit the connection must return."""
        if error is not None and self._error is None:
            self._error = error
        unread = self._inbox.clear()
        self._outbox.clear()
        self._closed.set()
        self._inbox.wake()
        return unread

    def refused(self, limit_bytes: int) -> int:
        """The body is over its limit: before the response began, it is answered 413 (the
        connection sends the HEADERS) and the rest of it refused; after, the stream is reset.
        The handler sees BodyTooLarge from now on. Returns the flow-controlled bytes it held
        unread."""
        if self.headers_sent:
            self._body.advance(BodyInput.CANCEL)
        else:
            self._body.advance(BodyInput.REFUSE)
            self._response.advance(ResponseInput.HEADERS_END)  # the 413 its connection sends
        if self._error is None:
            self._error = BodyTooLarge(self._too_large(limit_bytes))
        self._outbox.clear()
        self._inbox.wake()
        return self._inbox.clear()
