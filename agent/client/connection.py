"""One HTTP/2 client connection: asyncio's Protocol around h2's sans-IO H2Connection, with the
receive-side flow control done by `agent.h2.flow.ReceiveWindow`s (held by agent.client.credit) so
its policy is explicit. The responses it awaits and their request headers are
agent.client.response's, shared with HTTP/3's connection.

Hot path: the kernel reads into a `FrameReader` buffer; DATA frames of response streams are
handled here (checked against our windows, hashed, credited with WINDOW_UPDATE frames we write),
every other frame goes to h2 unchanged. h2 never sees those DATA frames, so it never credits
them either: DATA that h2 saw is credited through h2, DATA it did not through our own frames,
both by the same `ReceiveWindow`. A stream's end reaches h2 as a zero-length DATA frame with
END_STREAM, after h2's body-length count is set to what arrived, so h2 closes the stream and
checks content-length itself. All output of one read leaves in one write.

Streams opened as exchanges (agent.client.exchange) stay off the fast path: their DATA goes
through h2 to the exchange and is credited, by the same `ReceiveWindow`s, only when the
workload takes it; what the workload sends goes out through h2 under the server's windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import h2.events as ev
from h2.connection import ConnectionState
from h2.exceptions import FlowControlError, ProtocolError

from agent.client.credit import ReceiveCredit
from agent.client.exchange import ClientExchange, ClientExchanges, pump_uploads
from agent.client.lifecycle import ClientLifecycle, Input, State, lost_reason
from agent.client.response import Awaited, Response, request_headers, response_status
from agent.client.tcp_bytes import tcp_bytes
from agent.errors import ExchangeClosed, PeerProtocolError
from agent.exchange_queues import error_code_name, http2_code
from agent.h2.connection import h2_connection
from agent.h2.fastpath import (
    FLAG_END_STREAM,
    FLAG_PADDED,
    FRAME_HEADER_BYTES,
    TYPE_DATA,
    TYPE_HEADERS,
    TYPE_WINDOW_UPDATE,
    WINDOW_UPDATE_BYTES,
    FrameReader,
    H2Internals,
    Outgoing,
    SplitTally,
    data_frame_header,
    window_updates,
)
from agent.h2.flow import FlowControlOptions, ReceiveWindow
from agent.h2.settings import DEFAULT_INITIAL_WINDOW_SIZE, from_h2, settings_exchange, to_h2
from agent.h2.trace import FrameTrace
from agent.protocols.in_force import SettingsExchange

# What this client announces for names it is not given: no push (it never accepts one), h2's own
# client defaults made explicit so the record shows them, and the protocol's stream window.
DEFAULT_SETTINGS: Mapping[str, int] = {
    "enable_push": 0,
    "max_concurrent_streams": 100,
    "max_header_list_size": 65536,
    "initial_window_size": DEFAULT_INITIAL_WINDOW_SIZE,
}


_USABLE = (State.HANDSHAKE, State.OPEN)


@dataclass(eq=False)
class _FastStream:
    """A response stream whose DATA frames the fast path handles (after its HEADERS, until its
    end or reset)."""

    response: Response
    window: ReceiveWindow
    h2_stream: Any
    expected_length: int | None
    received_bytes: int = 0


class ClientConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        settings: Mapping[str, int],
        flow: FlowControlOptions,
        fast_path: bool = True,
        trace: FrameTrace | None = None,
    ) -> None:
        """`settings`: canonical names (agent.h2.settings), checked values; announced as given,
        the defaults filling in only names absent from them. `trace`: every frame sent and
        received, for the trial's event trace."""
        asked = to_h2({**DEFAULT_SETTINGS, **settings})
        self.conn = h2_connection(client_side=True, settings=asked)
        # The first SETTINGS frame exactly: the above and h2's values for the names it sends
        # unasked (header_table_size, enable_connect_protocol). Streams get its window.
        self.local_settings: Mapping[str, int] = from_h2(self.conn.local_settings)
        self.initial_window_size = self.local_settings["initial_window_size"]
        self.tally_in = SplitTally()
        self.tally_out = SplitTally(expect_preface=True)
        self.transport: asyncio.Transport | None = None
        self.credit = ReceiveCredit(self.conn, flow, self.initial_window_size)
        self._awaited = Awaited()
        self._reader = FrameReader(self.conn.max_inbound_frame_size)
        self._fast_enabled = fast_path and H2Internals.available()
        self._fast: dict[int, _FastStream] = {}
        self.trace = trace
        self._out = Outgoing(TYPE_WINDOW_UPDATE, trace)
        self._settings_received = asyncio.get_running_loop().create_future()
        self._closed = asyncio.get_running_loop().create_future()
        # Exchanges by stream; those with bytes or an end to send; extended CONNECTs waiting
        # for the server's SETTINGS (with their headers and end flag).
        self.exchanges = ClientExchanges(self)
        self._kicked = False
        self.lifecycle = ClientLifecycle()
        # PINGs awaiting their ACK, by their opaque data.
        self._pings: dict[bytes, asyncio.Future[None]] = {}
        self._pings_sent = 0

    # asyncio callbacks -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport: asyncio's, or uvloop's (which does not subclass asyncio's).
        self.transport = cast(asyncio.Transport, transport)
        self.lifecycle.advance(Input.MADE)
        self.conn.initiate_connection()
        self.credit.open()
        self._flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        reader = self._reader
        reader.commit(nbytes)
        if self.trace is not None:
            self.trace.received(reader.view[reader.end - nbytes : reader.end], time.monotonic_ns())
        fast = self._fast
        tally = self.tally_in
        while True:
            try:
                frame = reader.next_frame()
            except ProtocolError as exc:
                # Refused on its header (too long, wrong kind of stream): never buffered.
                tally.feed(reader.take_all())
                self._protocol_failure(exc)
                return
            if frame is None:
                break
            frame_type, flags, stream_id, start, length = frame
            if frame_type == TYPE_DATA and not reader.header_block:
                stream = fast.get(stream_id)
                if stream is not None:
                    tally.frames[TYPE_DATA] += 1
                    tally.frame_bytes[TYPE_DATA] += FRAME_HEADER_BYTES + length
                    if not self._on_fast_data(stream_id, stream, flags, start, length):
                        tally.feed(reader.take_all())
                        return
                    continue
            elif frame_type == TYPE_HEADERS and (stream := fast.get(stream_id)) is not None:
                # Trailers: h2 checks content-length at their END_STREAM, so its count must
                # hold what the fast path received.
                H2Internals.set_received_length(stream.h2_stream, stream.received_bytes)
            raw = reader.raw()
            tally.feed(raw)
            if not self._receive_h2(raw):
                tally.feed(reader.take_all())
                return
        self._out.write(self.transport, self.tally_out)

    def _on_fast_data(
        self, stream_id: int, stream: _FastStream, flags: int, start: int, length: int
    ) -> bool:
        """One DATA frame of a response stream; False once the connection has failed."""
        view = self._reader.view
        if flags & FLAG_PADDED:
            pad = view[start] if length else length
            if pad >= length:
                # Malformed padding: h2 sends the GOAWAY RFC 9113 prescribes.
                return self._receive_h2(self._reader.raw())
            data = view[start + 1 : start + length - pad]
        else:
            data = view[start : start + length]
        credit = self.credit
        connection_window = credit.connection
        window = stream.window
        if length > connection_window.allowance or length > window.allowance:
            self._protocol_failure(FlowControlError("Flow control window shrunk below 0"))
            return False
        end_stream = flags & FLAG_END_STREAM
        received = stream.received_bytes + len(data)
        expected = stream.expected_length
        if end_stream or (expected is not None and received > expected):
            # h2 closes the stream, or rejects the body's length before the frame counts as
            # received: either way it judges a zero-length DATA frame after its count is set.
            del self._fast[stream_id]
            H2Internals.set_received_length(stream.h2_stream, received)
            if expected is not None and received != expected:
                return self._receive_h2(data_frame_header(stream_id, 0, bool(end_stream)))
        stream.received_bytes = received
        increment = connection_window.consume(length)
        stream_increment = 0 if end_stream else window.consume(length)
        if increment or stream_increment:
            count = (increment > 0) + (stream_increment > 0)
            self._out.add_own(
                window_updates(stream_id, increment, stream_increment),
                WINDOW_UPDATE_BYTES * count,
                count,
            )
            credit.updates_sent += count
        # Response.take, inline: this runs once per DATA frame, the client's hottest path.
        response = stream.response
        response.size_bytes += len(data)
        response.digest.update(data)
        if response.body is not None:
            response.body += data
        if end_stream:
            return self._receive_h2(data_frame_header(stream_id, 0, True))
        return True

    def _receive_h2(self, data: bytes) -> bool:
        """Frames for h2 and the events they cause; False once the connection has failed."""
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            self._protocol_failure(exc)
            return False
        self._reader.max_frame_size = self.conn.max_inbound_frame_size
        now = time.monotonic_ns()
        for event in events:
            kind = type(event)
            if kind is ev.DataReceived:
                self._on_data(event, now)  # type: ignore[arg-type]
            elif kind is ev.ResponseReceived:
                self._on_response(event, now)  # type: ignore[arg-type]
            elif kind is ev.StreamEnded:
                self._on_end(event.stream_id, now)  # type: ignore[attr-defined]
            elif kind is ev.RemoteSettingsChanged:
                if not self._settings_received.done():
                    self.lifecycle.advance(Input.SETTINGS)
                    self._settings_received.set_result(None)
                    self.exchanges.settings_arrived()
                self._pump_uploads()
            elif kind is ev.WindowUpdated:
                self._pump_uploads()
            elif kind is ev.TrailersReceived:
                self._on_trailers(event)  # type: ignore[arg-type]
            elif kind is ev.StreamReset:
                self._on_reset(event)  # type: ignore[arg-type]
            elif kind is ev.PingAckReceived or kind is ev.ConnectionTerminated:
                self._on_connection_event(event)
        self._drain_h2()
        return True

    def _on_connection_event(self, event: ev.Event) -> None:
        """A PING's ACK, or the server's GOAWAY."""
        if isinstance(event, ev.PingAckReceived):
            pinged = self._pings.pop(event.ping_data or b"", None)
            if pinged is not None and not pinged.done():
                pinged.set_result(None)
        elif isinstance(event, ev.ConnectionTerminated):
            code = http2_code(event.error_code or 0)
            self.lifecycle.advance(Input.PEER_GOAWAY)
            self._fail_all(PeerProtocolError("server sent GOAWAY", code))

    def _protocol_failure(self, exc: ProtocolError) -> None:
        """The server broke HTTP/2: GOAWAY with the error's code (h2 has queued it already when
        the error was its own), fail every request, close."""
        self.lifecycle.advance(Input.FAILURE)
        if self.conn.state_machine.state is not ConnectionState.CLOSED:
            self.conn.close_connection(exc.error_code)
        said = f"server broke HTTP/2: {type(exc).__name__}: {exc}"
        self._fail_all(PeerProtocolError(said, http2_code(exc.error_code)))
        self._flush()
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Fails what is still waiting, saying why the connection ended (lost_reason): the
        server's close or the network's error, in which state; nothing new once we closed it
        or reported its failure."""
        reason = lost_reason(self.lifecycle.state, exc)
        self.lifecycle.advance(Input.LOST)
        self._fail_all(PeerProtocolError(reason or "connection closed"))
        if not self._closed.done():
            self._closed.set_result(None)

    # events ------------------------------------------------------------------------------------

    def _on_response(self, event: ev.ResponseReceived, now: int) -> None:
        response = self._awaited.get(event.stream_id)
        if response is None:
            exchange = self.exchanges.by_stream.get(event.stream_id)
            if exchange is not None:
                headers = dict(event.headers or ())
                exchange.deliver_head(response_status(headers), headers, now)
            return
        response.t_headers_ns = now
        response.headers = dict(event.headers or ())
        response.status = response_status(response.headers)
        window = self.credit.streams.get(event.stream_id)
        if self._fast_enabled and window is not None and event.stream_ended is None:
            h2_stream = self.conn.streams.get(event.stream_id)
            if h2_stream is not None:
                expected = H2Internals.expected_length(h2_stream)
                self._fast[event.stream_id] = _FastStream(response, window, h2_stream, expected)

    def _on_data(self, event: ev.DataReceived, now: int) -> None:
        # DATA that h2 saw (zero-length stream ends, or every frame with the fast path off,
        # or an exchange's: credited when the workload takes it).
        stream_id = event.stream_id
        size = event.flow_controlled_length
        by_stream = self.exchanges.by_stream
        if by_stream and (exchange := by_stream.get(stream_id)) is not None:
            exchange.deliver(event.data, size)
            return
        self.credit.credit(stream_id, size, event.stream_ended is None)
        response = self._awaited.get(stream_id)
        if response is not None:
            response.take(event.data)

    def _on_end(self, stream_id: int, now: int) -> None:
        self._fast.pop(stream_id, None)
        self.credit.forget(stream_id)
        if not self._awaited.end(stream_id, now):
            exchange = self.exchanges.by_stream.get(stream_id)
            if exchange is not None:
                exchange.deliver_end(now)
                self.exchanges.forget_if_done(exchange)

    def _on_trailers(self, event: ev.TrailersReceived) -> None:
        trailers = dict(event.headers or ())
        response = self._awaited.get(event.stream_id)
        if response is not None:
            response.trailers = trailers
        elif (exchange := self.exchanges.by_stream.get(event.stream_id)) is not None:
            exchange.deliver_trailers(trailers)

    def _on_reset(self, event: ev.StreamReset) -> None:
        self._fast.pop(event.stream_id, None)
        self.credit.forget(event.stream_id)
        exchange = self.exchanges.by_stream.get(event.stream_id)
        if exchange is not None:
            reason = f"server reset the stream of {exchange.path}"
            self._close_exchange(
                exchange, ExchangeClosed(f"{reason} ({error_code_name(event.error_code)})")
            )
        response = self._awaited.get(event.stream_id)
        if response is not None:
            said = f"server reset the stream for {response.path}"
            self._awaited.fail(
                event.stream_id, PeerProtocolError(said, http2_code(event.error_code))
            )

    def _fail_all(self, error: Exception) -> None:
        self._fast.clear()
        self.exchanges.waiting_failed(str(error))
        for exchange in list(self.exchanges.by_stream.values()):
            self._close_exchange(exchange, ExchangeClosed(f"{exchange.path}: {error}"))
        self._awaited.fail_all(error)
        for pinged in self._pings.values():
            if not pinged.done():
                pinged.set_exception(error)
        self._pings.clear()
        if not self._settings_received.done():
            self._settings_received.set_exception(error)
            self._settings_received.exception()  # mark retrieved: nobody may be waiting

    # requests ----------------------------------------------------------------------------------

    def request(
        self,
        authority: str,
        scheme: str,
        path: str,
        extra_headers: list[tuple[bytes, bytes]],
        *,
        keep_body: bool = False,
        hashed: bool = True,
    ) -> asyncio.Future[Response]:
        if self.transport is None or self.transport.is_closing():
            raise PeerProtocolError("connection is closed")
        stream_id = self.conn.get_next_available_stream_id()
        headers = request_headers(b"GET", authority, scheme, path, extra_headers)
        response = Response.of_get(path, keep_body, hashed)
        future = self._awaited.expect(stream_id, response)
        self.credit.stream_opened(stream_id)
        self.conn.send_headers(stream_id, headers, end_stream=True)
        self._flush()
        return future

    def open_exchange(
        self,
        method: bytes,
        authority: str,
        scheme: str,
        path: str,
        headers: list[tuple[bytes, bytes]],
        *,
        end_stream: bool,
    ) -> ClientExchange:
        """A stream for an exchange: pseudo-headers in `headers` (`:protocol`) go with the
        request's own, the rest after them. An extended CONNECT (RFC 8441) opens once the
        server's SETTINGS are in, if they allow it."""
        if self.transport is None or self.transport.is_closing():
            raise PeerProtocolError("connection is closed")
        block = request_headers(method, authority, scheme, path, headers)
        exchange = ClientExchange(self, method, path, time.monotonic_ns(), end_stream)
        self.exchanges.open(exchange, block, end_stream)
        return exchange

    # ExchangeHost (agent.client.exchange) ------------------------------------------------------

    connect_rfc = "RFC 8441"

    def settings_known(self) -> bool:
        return self._settings_received.done()

    def connect_enabled(self) -> bool:
        return bool(self.conn.remote_settings.enable_connect_protocol)

    def open_stream(self, headers: list[tuple[bytes, bytes]], end_stream: bool) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        self.credit.stream_opened(stream_id)
        self.conn.send_headers(stream_id, headers, end_stream=end_stream)
        return stream_id

    def _pump_uploads(self) -> None:
        uploads = self.exchanges.uploads
        if uploads:
            conn = self.conn
            done = self.exchanges.forget_if_done
            pump_uploads(conn, uploads, conn.max_outbound_frame_size, done)

    def _close_exchange(self, exchange: ClientExchange, error: ExchangeClosed) -> None:
        stream_id = exchange.stream_id
        self.credit.forget(stream_id)
        unread = self.exchanges.close(exchange, error)
        if unread:
            # The stream is over; the connection's credit for what nobody will read is not.
            self.credit.credit(stream_id, unread, stream_open=False)

    def kick(self) -> None:
        """Send what exchanges queued or credited, once per event-loop turn."""
        if not self._kicked:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._kicked_flush)

    def _kicked_flush(self) -> None:
        self._kicked = False
        if self.transport is None or self.transport.is_closing():
            return
        self._pump_uploads()
        self._flush()

    # ClientExchangeLink (agent.client.exchange) -------------------------------------------------

    def exchange_queued(self, exchange: ClientExchange) -> None:
        self.exchanges.queued(exchange)

    def exchange_consumed(self, exchange: ClientExchange, flow_controlled_bytes: int) -> None:
        # The stream's window is gone once its response ended: then only the connection's counts.
        self.credit.credit(exchange.stream_id, flow_controlled_bytes, stream_open=True)
        self.kick()

    def exchange_reset(self, exchange: ClientExchange, error_code: int) -> None:
        if self.exchanges.owns(exchange):
            with contextlib.suppress(ProtocolError):
                self.conn.reset_stream(exchange.stream_id, error_code)
        self._close_exchange(exchange, ExchangeClosed(f"{exchange.path}: reset by the client"))
        self.kick()

    async def settings_received(self) -> None:
        await self._settings_received

    @property
    def window_updates_sent(self) -> int:
        return self.credit.updates_sent

    @property
    def peer_max_concurrent_streams(self) -> int:
        return int(self.conn.remote_settings.max_concurrent_streams)

    def peer_settings(self) -> dict[str, int]:
        return from_h2(self.conn.remote_settings)

    def settings_exchange(self) -> SettingsExchange:
        return settings_exchange(self.conn, self._settings_received.done())

    @property
    def tls_version(self) -> str | None:
        """As the TLS library names it ("TLSv1.3"); None over cleartext."""
        tls = self._tls()
        return None if tls is None else str(tls.version())

    def sent_counts(self) -> dict[str, object]:
        return self.tally_out.counts().to_dict()

    def received_counts(self) -> dict[str, object]:
        return self.tally_in.counts().to_dict()

    def qlog_events(self, start_ns: int, start_wall_ns: int) -> Iterable[Mapping[str, object]]:
        """The trace's qlog events, `time` in ms after `start_ns` (the monotonic clock's reading
        at `start_wall_ns`); none untraced."""
        return () if self.trace is None else self.trace.qlog_events(start_ns)

    def transport_record(self) -> dict[str, object] | None:
        """What the transport under HTTP/2 adds to the record: nothing (HTTP/3's has one)."""
        return None

    @property
    def usable(self) -> bool:
        """Whether a request may still go on it: not gone away, failed, closing or lost."""
        return self.lifecycle.state in _USABLE

    async def ping(self) -> None:
        """Send a PING and wait for its ACK; raises PeerProtocolError if the connection ends
        first."""
        self._pings_sent += 1
        opaque = self._pings_sent.to_bytes(8, "big")
        pinged = asyncio.get_running_loop().create_future()
        self._pings[opaque] = pinged
        self.conn.ping(opaque)
        self._flush()
        await pinged

    def _tls(self) -> ssl.SSLObject | None:
        return None if self.transport is None else self.transport.get_extra_info("ssl_object")

    # TLS over TCP here sends no early data (Python's ssl has none).
    early_data_accepted = False

    @property
    def resumed(self) -> bool:
        """Its TLS handshake resumed an earlier session (a ticket the server took)."""
        tls = self._tls()
        return tls is not None and tls.session_reused

    def session_ticket(self) -> ssl.SSLSession | None:
        """The TLS session a later connection of the same context may offer to resume: once
        the server's NewSessionTicket has arrived (TLS 1.3 sends it after the handshake, so
        after a response has been read); None over cleartext or before."""
        tls = self._tls()
        session = None if tls is None else tls.session
        return session if session is not None and session.has_ticket else None

    async def wait_ticket(self) -> None:
        """At once: OpenSSL sends its TLS 1.3 tickets right after the handshake, before any
        response, so they are in once a response is."""

    def wire_bytes(self) -> tuple[int, int] | None:
        """The TCP payload bytes sent (acknowledged) and received so far, TLS's handshake and
        records included (agent.client.tcp_bytes); None where the kernel cannot tell."""
        if self.transport is None:
            return None
        return tcp_bytes(self.transport.get_extra_info("socket"))

    async def shut(self) -> None:
        """The client's part of closing, the trial's close phase: over TCP that is all of it
        (GOAWAY, then the socket closed, its FIN sent, by the time the transport is lost)."""
        await self.close()

    async def close(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.lifecycle.advance(Input.CLOSE)
        self.conn.close_connection()
        self._flush()
        self.transport.close()
        await self._closed

    def _drain_h2(self) -> None:
        self._out.add_h2(self.conn.data_to_send())

    def _flush(self) -> None:
        self._drain_h2()
        self._out.write(self.transport, self.tally_out)
