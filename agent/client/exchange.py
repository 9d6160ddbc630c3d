"""One client stream driven piece by piece: its request body sent as the workload produces it,
its response taken chunk by chunk.

The exchange holds the stream's state and the workload's waits; its connection (a
`ClientExchangeLink`, in practice agent.client.connection.ClientConnection) does the HTTP/2
part. Response DATA is queued here as it arrives and its credit goes back to the server only
when `receive()` hands the chunk over (through the connection's `ReceiveWindow` policy), so a
reader that stops reading stops the server. Bytes queued by `send` leave as DATA under the
server's window; until then they are `buffered_bytes`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from agent.errors import AgentError, ExchangeClosed, ExchangeRefused, ExchangeStateError
from agent.exchange_queues import FrameSender, QueuedExchange, send_queued_frame

__all__ = ["ClientExchange", "ExchangeClosed"]


class ClientExchangeLink(Protocol):
    """What an exchange asks of its connection."""

    def exchange_queued(self, exchange: ClientExchange) -> None:
        """Bytes or the request's end were queued: send them when the server's window allows."""
        ...

    def exchange_consumed(self, exchange: ClientExchange, flow_controlled_bytes: int) -> None:
        """The workload took a chunk: credit the server by the connection's policy."""
        ...

    def exchange_reset(self, exchange: ClientExchange, error_code: int) -> None: ...


class ClientExchange(QueuedExchange):
    def __init__(
        self,
        link: ClientExchangeLink,
        method: bytes,
        path: str,
        t_request_ns: int,
        end_stream: bool = False,
    ) -> None:
        """`end_stream`: the request has no body (its HEADERS end the stream)."""
        super().__init__(end_queued=end_stream)
        self.method = method
        self.path = path
        # 0 until the stream is opened: an extended CONNECT waits for the server's SETTINGS.
        self.stream_id = 0
        self.t_request_ns = t_request_ns
        self.t_headers_ns = 0
        self.t_end_ns = 0
        self.response_ended = False
        self._link = link
        self._head: asyncio.Future[tuple[int, dict[bytes, bytes]]] = (
            asyncio.get_running_loop().create_future()
        )
        self._trailers: dict[bytes, bytes] | None = None

    # the workload's side -------------------------------------------------------------------------

    async def response_head(self) -> tuple[int, Mapping[bytes, bytes]]:
        """The response's status and headers (pseudo-headers included)."""
        return await asyncio.shield(self._head)

    async def receive(self) -> bytes | None:
        """The next chunk of the response body, None at its end (then `trailers` is set if the
        server sent any). Its credit goes back to the server now. Raises ExchangeClosed if the
        stream was reset before the response ended."""
        while True:
            if (data := self._pop_received()) is not None:
                return data
            if self.response_ended:
                return None
            if self._error is not None:
                raise self._error
            await self._inbox.wait()

    def send(self, data: bytes | memoryview, end_stream: bool = False) -> None:
        """Queue request body bytes (not copied: do not change them afterwards); they leave as
        DATA under the server's window. Never blocks: bound the queue with `drain`."""
        if self._error is not None:
            raise self._error
        if self.end_queued:
            raise ExchangeStateError(f"{self._name}: send after the request ended")
        self._queue(data, end_stream)

    def end(self) -> None:
        """END_STREAM after the bytes queued so far."""
        self.send(b"", end_stream=True)

    @property
    def trailers(self) -> Mapping[bytes, bytes] | None:
        """The response's trailers, once `receive()` returned None; None if there were none."""
        return self._trailers

    @property
    def closed(self) -> bool:
        """Reset (by either side), refused, or its connection is gone."""
        return self._error is not None

    def reset(self, error_code: int = 8) -> None:
        """RST_STREAM with `error_code` (CANCEL by default); queued bytes are dropped."""
        if self._error is None and not (self.response_ended and self.end_queued):
            self._link.exchange_reset(self, error_code)

    @property
    def _name(self) -> str:
        return f"{self.method.decode(errors='replace')} {self.path} (stream {self.stream_id})"

    # the connection's side -----------------------------------------------------------------------

    def _credit(self, flow_controlled_bytes: int) -> None:
        self._link.exchange_consumed(self, flow_controlled_bytes)

    def _queued(self) -> None:
        self._link.exchange_queued(self)

    def deliver_head(self, status: int, headers: dict[bytes, bytes], now_ns: int) -> None:
        self.t_headers_ns = now_ns
        if not self._head.done():
            self._head.set_result((status, headers))

    def deliver(self, data: bytes, flow_controlled_bytes: int) -> None:
        self._inbox.put(data, flow_controlled_bytes)

    def deliver_trailers(self, trailers: dict[bytes, bytes]) -> None:
        self._trailers = trailers

    def upload_stopped(self) -> None:
        """The server wants no more of the request body (HTTP/3's STOP_SENDING with
        H3_NO_ERROR: its response does without it): what is queued is dropped, the request is
        over, and a `drain` returns; the response still arrives."""
        self._outbox.clear()
        self._queue_end()

    def deliver_end(self, now_ns: int) -> None:
        self.t_end_ns = now_ns
        self.response_ended = True
        self._inbox.wake()
        if not self._head.done():
            self._head.set_exception(ExchangeClosed(f"{self._name}: ended without a response"))

    def close(self, error: AgentError) -> int:
        """The stream was reset or the connection is gone. A response that had ended stays
        readable; otherwise what was received unread is dropped. Returns the flow-controlled
        bytes dropped, whose connection credit the connection gives back."""
        if self._error is None:
            self._error = error
        unread = 0 if self.response_ended else self._inbox.clear()
        self._outbox.clear()
        if not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved: the workload may never ask for the head
        self._inbox.wake()
        return unread


def is_extended_connect(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """A request with `:protocol` (RFC 8441, RFC 9220): it may open only once the server's
    SETTINGS have enabled it."""
    return any(name == b":protocol" for name, _value in headers)


class UploadSender(FrameSender, Protocol):
    def end_stream(self, stream_id: int, /) -> None:
        """END_STREAM alone, after the request's last bytes went without it."""
        ...


def pump_uploads(
    sender: UploadSender,
    uploads: dict[int, ClientExchange],
    max_frame_bytes: int,
    done: Callable[[ClientExchange], None],
) -> None:
    """Send what exchanges queued, one DATA frame per stream per round while `sender`'s windows
    allow, and each request's end after its last bytes; an exchange with nothing more to send
    leaves `uploads` and goes to `done`."""
    while uploads:
        progressed = False
        for stream_id, exchange in list(uploads.items()):
            end = False
            if exchange.buffered_bytes:
                sent = send_queued_frame(sender, stream_id, exchange, max_frame_bytes, may_end=True)
                if sent is None:
                    continue
                _sent_bytes, end = sent
                progressed = True
                if exchange.buffered_bytes:
                    continue
            del uploads[stream_id]
            if exchange.end_queued and not end:
                sender.end_stream(stream_id)
                progressed = True
            done(exchange)
        if not progressed:
            return


class ExchangeHost(Protocol):
    """What `ClientExchanges` asks of its connection, HTTP/2's or HTTP/3's."""

    connect_rfc: str  # the RFC of extended CONNECT over this protocol, for refusals

    def settings_known(self) -> bool:
        """The server's first SETTINGS are in."""
        ...

    def connect_enabled(self) -> bool:
        """The server's SETTINGS enable extended CONNECT."""
        ...

    def open_stream(self, headers: list[tuple[bytes, bytes]], end_stream: bool) -> int:
        """Send the request's HEADERS on a new stream (and keep what the protocol keeps per
        stream); its id."""
        ...

    def kick(self) -> None:
        """Send what exchanges queued, once this event-loop turn is over."""
        ...


class ClientExchanges:
    """A client connection's exchanges: by stream while anything of them may still arrive,
    those with bytes or an end to send (`uploads`), and extended CONNECTs waiting for the
    server's SETTINGS (which must enable them, else the exchange is refused)."""

    def __init__(self, host: ExchangeHost) -> None:
        self._host = host
        self.by_stream: dict[int, ClientExchange] = {}
        self.uploads: dict[int, ClientExchange] = {}
        self._waiting: list[tuple[ClientExchange, list[tuple[bytes, bytes]], bool]] = []

    def open(
        self, exchange: ClientExchange, headers: list[tuple[bytes, bytes]], end_stream: bool
    ) -> None:
        if is_extended_connect(headers) and not self._host.settings_known():
            self._waiting.append((exchange, headers, end_stream))
        else:
            self._open(exchange, headers, end_stream)

    def settings_arrived(self) -> None:
        """Open the extended CONNECTs that waited for the server's SETTINGS."""
        waiting, self._waiting = self._waiting, []
        for exchange, headers, end_stream in waiting:
            if not exchange.closed:  # reset by the workload while it waited
                self._open(exchange, headers, end_stream)

    def _open(
        self, exchange: ClientExchange, headers: list[tuple[bytes, bytes]], end_stream: bool
    ) -> None:
        if is_extended_connect(headers) and not self._host.connect_enabled():
            exchange.close(
                ExchangeRefused(
                    f"extended CONNECT to {exchange.path}: the server did not announce"
                    f" SETTINGS_ENABLE_CONNECT_PROTOCOL ({self._host.connect_rfc})"
                )
            )
            return
        stream_id = self._host.open_stream(headers, end_stream)
        exchange.stream_id = stream_id
        self.by_stream[stream_id] = exchange
        if exchange.buffered_bytes or (exchange.end_queued and not end_stream):
            self.uploads[stream_id] = exchange
        self._host.kick()

    def owns(self, exchange: ClientExchange) -> bool:
        """Its stream is open here (not closed, forgotten, or waiting to open)."""
        return self.by_stream.get(exchange.stream_id) is exchange

    def queued(self, exchange: ClientExchange) -> None:
        """The workload queued bytes or the request's end."""
        if self.owns(exchange):
            self.uploads[exchange.stream_id] = exchange
            self._host.kick()

    def forget_if_done(self, exchange: ClientExchange) -> None:
        """Both directions ended: nothing more arrives for the exchange."""
        if exchange.response_ended and exchange.end_queued and not exchange.buffered_bytes:
            self.by_stream.pop(exchange.stream_id, None)

    def close(self, exchange: ClientExchange, error: ExchangeClosed) -> int:
        """The stream is over (reset, or the connection gone): the flow-controlled bytes it
        received and nobody read (agent.client.exchange.ClientExchange.close)."""
        self.by_stream.pop(exchange.stream_id, None)
        self.uploads.pop(exchange.stream_id, None)
        return exchange.close(error)

    def waiting_failed(self, reason: str) -> None:
        """The connection ended before the server's SETTINGS: the waiting ones fail."""
        for exchange, _headers, _end in self._waiting:
            exchange.close(ExchangeClosed(f"{exchange.path}: {reason}"))
        self._waiting.clear()
