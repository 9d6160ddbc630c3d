"""The client's HTTP/3 connection: what a trial's session asks of a connection
(agent.client.trial.TrialSession: GETs tagged with the trial, exchanges sent and taken piece by
piece, the server's stream limit, the record's counts), over qh3.

Exchanges are HTTP/2's (agent.client.exchange) over HTTP/3's request streams (agent.h3.wire):
their request bodies are handed to qh3 a bounded amount at a time, before each transmit; the
credit for what they receive is qh3's (it grants as bytes arrive, not as the workload takes
them). An extended CONNECT (RFC 9220) opens once the server's SETTINGS enable it.

A connection is one trial's, as over HTTP/2: made at the trial's start, its handshake timed as
the trial's connect, closed at its end. Its `transport` counts go into the trial's record.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable, Iterable, Mapping

from qh3.h3.connection import ErrorCode, Setting
from qh3.h3.events import DataReceived, HeadersReceived, StopSending, StreamReset
from qh3.quic.connection import QuicConnection
from qh3.quic.events import ConnectionTerminated, HandshakeCompleted, QuicEvent
from qh3.tls import SessionTicket

from agent.client.connect import Target
from agent.client.exchange import ClientExchange, ClientExchanges, pump_uploads
from agent.client.h3_protocol import QuicClientProtocol
from agent.client.options import TrialOptions
from agent.client.response import Awaited, Response, request_headers, response_status
from agent.errors import ExchangeClosed, FetchError, PeerProtocolError, ProtocolCode
from agent.h3.credit import CreditLedger
from agent.h3.protocol import H3
from agent.h3.settings import QuicWindows
from agent.h3.stack import (
    AnnouncingH3,
    TransportCounts,
    ack_gate,
    configuration,
    inside_data_frame,
    settings_exchange,
    tap,
)
from agent.h3.trace import TrialQuicLogger, connection_trace
from agent.h3.udp import SocketBuffers, datagram_transport, rcvbuf_errors, udp_socket
from agent.h3.wire import STREAM_BUFFER_BYTES, H3Wire, close_code, h3_code, h3_error_name
from agent.protocols.in_force import SettingsExchange
from agent.traffic import FrameCounts

# The peer's HTTP/3 SETTINGS under the names the records use.
_PEER_SETTING_NAMES: dict[int, str] = {
    Setting.QPACK_MAX_TABLE_CAPACITY: "header_table_size",
    Setting.MAX_FIELD_SECTION_SIZE: "max_header_list_size",
    Setting.QPACK_BLOCKED_STREAMS: "qpack_blocked_streams",
    Setting.ENABLE_CONNECT_PROTOCOL: "enable_connect_protocol",
    Setting.H3_DATAGRAM: "h3_datagram",
}
_IDLE_TIMEOUT_S = 30.0


class TicketInbox:
    """qh3's session_ticket_handler for one client connection: the server's session tickets,
    the newest last."""

    def __init__(self) -> None:
        self.tickets: list[SessionTicket] = []
        self.arrived = asyncio.Event()

    def __call__(self, ticket: SessionTicket) -> None:
        self.tickets.append(ticket)
        self.arrived.set()


class H3ClientConnection:
    """GETs over one QUIC connection, each response's body hashed as it arrives, and
    exchanges."""

    def __init__(
        self,
        protocol: QuicClientProtocol,
        transport: asyncio.BaseTransport,
        windows: QuicWindows,
        buffers: SocketBuffers,
        inbox: TicketInbox | None = None,
    ) -> None:
        """`inbox`: the session tickets qh3 hands its connection's handler."""
        self._protocol = protocol
        self._transport = transport
        self.windows = windows
        self.buffers = buffers
        self._quic = protocol.tapped
        # Taken now: qh3 lets go of a connection's trace when the connection ends.
        self._trace = connection_trace(self._quic)
        self._h3 = AnnouncingH3(self._quic, windows)
        self._wire = H3Wire(self._h3, self._quic)
        self._awaited = Awaited()
        self.exchanges = ClientExchanges(self)
        self._kicked = False
        self._settings: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A connection lost before its SETTINGS fails the future whether or not a trial waits.
        self._settings.add_done_callback(lambda done: done.cancelled() or done.exception())
        # Why the connection ended, and the code it ended with, once it has.
        self._lost: str | None = None
        self._lost_code: ProtocolCode | None = None
        self._rcvbuf_errors_at_start = rcvbuf_errors()
        self.inbox = inbox or TicketInbox()
        # What its handshake was, once done.
        self.resumed = False
        self.early_data_accepted = False
        self.local_settings: Mapping[str, int] = windows.announced()
        protocol.on_event = self._event
        self._quic.take_stream_data = self._body_inside_frame
        protocol.before_transmit = self._pump_uploads
        protocol.uploads = self.exchanges.uploads

    @property
    def lost_reason(self) -> str | None:
        """Why the connection ended, once it has, with its code."""
        return None if self._lost is None else str(self._lost_error())

    def _lost_error(self) -> PeerProtocolError:
        assert self._lost is not None
        return PeerProtocolError(self._lost, self._lost_code)

    @property
    def window_updates_sent(self) -> int | None:
        return None  # QUIC's credit is the receiver's MAX_STREAM_DATA, sent by qh3's core

    # What a trial session asks of its connection.

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
        if self._lost is not None:
            raise self._lost_error()
        stream_id = self._quic.get_next_available_stream_id()
        headers = request_headers(b"GET", authority, scheme, path, extra_headers)
        self._h3.send_headers(stream_id, headers, end_stream=True)
        future = self._awaited.expect(stream_id, Response.of_get(path, keep_body, hashed))
        self._protocol.transmit()
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
        if self._lost is not None:
            raise self._lost_error()
        block = request_headers(method, authority, scheme, path, headers)
        exchange = ClientExchange(self, method, path, time.monotonic_ns(), end_stream)
        self.exchanges.open(exchange, block, end_stream)
        return exchange

    # ExchangeHost (agent.client.exchange)

    connect_rfc = "RFC 9220"

    def settings_known(self) -> bool:
        return self._settings.done()

    def connect_enabled(self) -> bool:
        received = self._h3.received_settings or {}
        return received.get(Setting.ENABLE_CONNECT_PROTOCOL) == 1

    def open_stream(self, headers: list[tuple[bytes, bytes]], end_stream: bool) -> int:
        stream_id: int = self._quic.get_next_available_stream_id()
        self._h3.send_headers(stream_id, headers, end_stream=end_stream)
        return stream_id

    def _pump_uploads(self) -> None:
        exchanges = self.exchanges
        pump_uploads(self._wire, exchanges.uploads, STREAM_BUFFER_BYTES, exchanges.forget_if_done)

    def kick(self) -> None:
        """Send what exchanges queued, once per event-loop turn."""
        if not self._kicked:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._kicked_transmit)

    def _kicked_transmit(self) -> None:
        self._kicked = False
        if self._lost is None:
            self._protocol.transmit()

    # ClientExchangeLink (agent.client.exchange)

    def exchange_queued(self, exchange: ClientExchange) -> None:
        self.exchanges.queued(exchange)

    def exchange_consumed(self, exchange: ClientExchange, flow_controlled_bytes: int) -> None:
        """qh3 granted the credit when the bytes arrived."""

    def exchange_reset(self, exchange: ClientExchange, error_code: int) -> None:
        if self.exchanges.owns(exchange) and self._lost is None:
            self._wire.reset_stream(exchange.stream_id, error_code)
        self.exchanges.close(exchange, ExchangeClosed(f"{exchange.path}: reset by the client"))
        self.kick()

    async def settings_received(self) -> None:
        await self._settings

    @property
    def peer_max_concurrent_streams(self) -> int:
        return self._quic.max_concurrent_bidi_streams

    def peer_settings(self) -> dict[str, int]:
        received = self._h3.received_settings or {}
        return {_PEER_SETTING_NAMES.get(k, f"0x{k:x}"): v for k, v in sorted(received.items())}

    def settings_exchange(self) -> SettingsExchange:
        return settings_exchange(self._quic, self._h3)

    @property
    def tls_version(self) -> str:
        return "TLSv1.3"  # RFC 9001: QUIC's handshake is TLS 1.3's

    def sent_counts(self) -> dict[str, object]:
        counts = self._protocol.counts
        return FrameCounts({"datagrams": counts.datagrams_sent}, {}, counts.bytes_sent).to_dict()

    def received_counts(self) -> dict[str, object]:
        counts = self._protocol.counts
        datagrams = {"datagrams": counts.datagrams_received}
        return FrameCounts(datagrams, {}, counts.bytes_received).to_dict()

    def qlog_events(self, start_ns: int, start_wall_ns: int) -> Iterable[Mapping[str, object]]:
        """qh3's events for this connection, `time` in ms after `start_wall_ns` (qh3 stamps
        them with the wall clock); none untraced."""
        if self._trace is None:
            return ()
        reference_ms = start_wall_ns / 1e6
        return ({**event, "time": event["time"] - reference_ms} for event in self._trace.take())

    def transport_record(self) -> dict[str, object]:
        """The connection's QUIC counts so far, for the trial's record."""
        core = self._quic.core
        start, now = self._rcvbuf_errors_at_start, rcvbuf_errors()
        return {
            "protocol": H3.name,
            "datagram_bytes": self.windows.datagram_bytes,
            **self.windows.ack_policy.to_dict(),
            "connection_window_bytes": self.windows.connection_window_bytes,
            "packets_lost": None if core is None else core.loss_total,
            "pto_count": None if core is None else core.pto_total,
            "udp_rcvbuf_errors": None if start is None or now is None else now - start,
            "smoothed_rtt_s": None if core is None else core.smoothed_rtt,
            "socket_buffers": self.buffers.to_dict(),
        }

    @property
    def usable(self) -> bool:
        """Whether a request may still go on it: not ended (QUIC's idle timeout, the lower of
        both sides', ends it silently on both)."""
        return self._lost is None

    async def ping(self) -> None:
        """A QUIC PING, waited for until acknowledged."""
        if self._lost is not None:
            raise self._lost_error()
        try:
            await self._protocol.ping()
        except ConnectionError:
            raise (
                self._lost_error()
                if self._lost is not None
                else PeerProtocolError("the QUIC connection closed before a PING's ACK")
            ) from None

    async def wait_ticket(self) -> None:
        """Until the server's first session ticket is in: it comes after the handshake, and
        can come after the response to a 0-RTT request."""
        await self.inbox.arrived.wait()

    def session_ticket(self) -> SessionTicket | None:
        """The server's newest session ticket, for a later connection to resume this one's
        session (with 0-RTT where the ticket allows early data); None before one came."""
        return self.inbox.tickets[-1] if self.inbox.tickets else None

    def wire_bytes(self) -> tuple[int, int]:
        """The UDP payload bytes sent and received so far, the handshake's included."""
        counts = self._protocol.counts
        return counts.bytes_sent, counts.bytes_received

    async def shut(self) -> None:
        """The client's part of closing, the trial's close phase: CONNECTION_CLOSE sent. QUIC's
        closing period after it (three PTOs, only answering with CONNECTION_CLOSE again) is
        `close`'s, outside the trial's window."""
        self._protocol.close()

    async def close(self) -> None:
        self._protocol.close()
        if self._protocol.handshake_done:  # else there is no peer to wait for
            await self._protocol.wait_closed()
        self._transport.close()

    # Events

    def _event(self, event: QuicEvent) -> None:
        if isinstance(event, ConnectionTerminated):
            self._lose(event)
            return
        if isinstance(event, HandshakeCompleted):
            self.resumed = event.session_resumed
            self.early_data_accepted = event.early_data_accepted
        for h3_event in self._h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived | DataReceived):
                exchange = self.exchanges.by_stream.get(h3_event.stream_id)
                if exchange is not None:
                    self._exchange_event(exchange, h3_event)
                else:
                    self._h3_event(h3_event)
            elif isinstance(h3_event, StreamReset | StopSending):
                self._stream_stopped(h3_event)
        if not self._settings.done() and self._h3.received_settings is not None:
            self._settings.set_result(None)
            self.exchanges.settings_arrived()

    def _body_inside_frame(self, stream_id: int, data: bytes, end_stream: bool) -> bool:
        """A GET response's chunk inside the DATA frame being received, hashed without qh3's
        per-chunk event objects and calls (agent.h3.stack.inside_data_frame); whether it
        was. An exchange's, and every other chunk, go through qh3's layer."""
        response = self._awaited.get(stream_id)
        if response is None or not inside_data_frame(self._h3, stream_id, len(data), end_stream):
            return False
        response.take(data)
        return True

    def _exchange_event(
        self, exchange: ClientExchange, event: HeadersReceived | DataReceived
    ) -> None:
        now = time.monotonic_ns()
        if isinstance(event, HeadersReceived):
            headers = dict(event.headers)
            if exchange.t_headers_ns:
                exchange.deliver_trailers(headers)
            else:
                exchange.deliver_head(response_status(headers), headers, now)
        elif event.data:
            exchange.deliver(event.data, len(event.data))
        if event.stream_ended:
            exchange.deliver_end(now)
            self.exchanges.forget_if_done(exchange)

    def _stream_stopped(self, event: StreamReset | StopSending) -> None:
        """The server reset a stream, or asked us to stop sending on it: with H3_NO_ERROR
        (RFC 9114 4.1) only the request body stops, the response still comes."""
        stream_id = event.stream_id
        exchanges = self.exchanges
        exchange = exchanges.by_stream.get(stream_id)
        if exchange is not None:
            if isinstance(event, StopSending) and event.error_code == ErrorCode.H3_NO_ERROR:
                exchanges.uploads.pop(stream_id, None)
                exchange.upload_stopped()
                exchanges.forget_if_done(exchange)
            else:
                name = h3_error_name(event.error_code)
                reason = f"server reset the stream of {exchange.path} ({name})"
                exchanges.close(exchange, ExchangeClosed(reason))
        response = self._awaited.get(stream_id)
        if response is not None:
            said = f"server reset the stream for {response.path}"
            self._awaited.fail(stream_id, PeerProtocolError(said, h3_code(event.error_code)))

    def _h3_event(self, event: HeadersReceived | DataReceived) -> None:
        response = self._awaited.get(event.stream_id)
        if response is None:
            return
        if isinstance(event, HeadersReceived):
            if response.t_headers_ns:
                response.trailers = dict(event.headers)
            else:
                response.t_headers_ns = time.monotonic_ns()
                headers = dict(event.headers)
                response.headers = headers
                try:
                    response.status = int(headers.get(b":status", b"0"))
                except ValueError:
                    said = f"GET {response.path}: a :status that is no number"
                    self._awaited.fail(event.stream_id, PeerProtocolError(said))
                    return
        else:
            response.take(event.data)
        if event.stream_ended:
            self._awaited.end(event.stream_id, time.monotonic_ns())

    def _lose(self, event: ConnectionTerminated) -> None:
        self._lost = f"the QUIC connection closed: {event.reason_phrase or 'no reason given'}"
        self._lost_code = close_code(event.error_code, event.frame_type)
        said = str(self._lost_error())
        self._awaited.fail_all(self._lost_error())
        self.exchanges.waiting_failed(said)
        for exchange in list(self.exchanges.by_stream.values()):
            self.exchanges.close(exchange, ExchangeClosed(f"{exchange.path}: {said}"))
        if not self._settings.done():
            self._settings.set_exception(self._lost_error())


def warm_up() -> None:
    """qh3 initialises its TLS machinery on a process's first connection (about 23 ms of CPU
    on this project's machine, 0.3 ms for every later one): build a throwaway connection's first
    Initial, sent nowhere, so that cost falls in the agent's start-up with its imports, not in
    its first trial's measured window."""
    windows = QuicWindows(65535, 65535)
    config = configuration(windows, is_client=True, idle_timeout_s=_IDLE_TIMEOUT_S, insecure=True)
    throwaway = QuicConnection(configuration=config)
    now = time.monotonic()
    throwaway.connect(("127.0.0.1", 9), now=now)  # the discard port; nothing is sent
    throwaway.datagrams_to_send(now=now)


async def _udp_to(
    target: Target, buffer_bytes: int | None
) -> tuple[socket.socket, SocketBuffers, tuple[str, int]]:
    """A UDP socket connected to `target`, its buffers, and the address it reaches."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(target.host, target.port, type=socket.SOCK_DGRAM)
    except OSError as exc:
        raise FetchError(f"cannot resolve {target.host}: {exc.strerror or exc}") from None
    address = infos[0][4]
    local = "::" if infos[0][0] == socket.AF_INET6 else "0.0.0.0"
    kwargs: dict[str, int] = {} if buffer_bytes is None else {"buffer_bytes": buffer_bytes}
    try:
        sock, buffers = udp_socket(local, 0, **kwargs)
    except OSError as exc:
        raise FetchError(f"cannot open a UDP socket: {exc.strerror or exc}") from None
    try:
        sock.connect(address[:2])
    except OSError as exc:
        sock.close()
        raise FetchError(
            f"cannot reach {target.authority} over UDP: {exc.strerror or exc}"
        ) from None
    return sock, buffers, (str(address[0]), int(address[1]))


async def open_h3_connection(
    target: Target,
    options: TrialOptions,
    windows: QuicWindows,
    buffer_bytes: int | None = None,
    *,
    offer: SessionTicket | None = None,
    early: Callable[[H3ClientConnection], None] | None = None,
) -> H3ClientConnection:
    """A QUIC connection to `target`, handshake done (HTTP/3 is always https); resuming the
    session of `offer`, a ticket of an earlier connection's, if given. `early` is called with
    the connection right after its first flight when `offer` allows 0-RTT, so what it sends
    goes as early data; `connection.early_data_accepted` then says whether the server took it
    (if not, qh3 sends it again after the handshake)."""
    sock, buffers, address = await _udp_to(target, buffer_bytes)
    try:
        ipaddress.ip_address(target.host)
        server_name = None
    except ValueError:
        server_name = target.host
    config = configuration(
        windows,
        is_client=True,
        idle_timeout_s=max(_IDLE_TIMEOUT_S, options.timeout_s),
        ca_file=options.ca_file,
        insecure=options.insecure,
        server_name=server_name,
    )
    config.session_ticket = offer
    if options.events_dir is not None:
        # qh3's own QUIC events; with a logger, the stack leaves its batch fast path (stack.py).
        config.quic_logger = TrialQuicLogger()
    counts = TransportCounts()
    inbox = TicketInbox()
    quic = tap(
        QuicConnection(configuration=config, session_ticket_handler=inbox),
        CreditLedger(),
        counts,
        False,
        ack_gate(windows),
    )
    transport, protocol = await datagram_transport(lambda: QuicClientProtocol(quic, counts), sock)
    assert isinstance(protocol, QuicClientProtocol)
    connection = H3ClientConnection(protocol, transport, windows, buffers, inbox)
    protocol.connect(address)
    if early is not None and offer is not None and offer.max_early_data_size:
        early(connection)
        protocol.transmit()
    handshake = asyncio.ensure_future(protocol.wait_connected())
    try:
        either: set[asyncio.Future[object]] = {handshake, protocol.refused}  # type: ignore[arg-type]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not handshake.done():
            refused = protocol.refused.result()
            raise FetchError(
                f"no QUIC handshake with {target.authority}: nothing answers on UDP "
                f"({refused.strerror or refused})"
            )
        try:
            handshake.result()
        except ConnectionError as exc:
            reason = connection.lost_reason or str(exc) or type(exc).__name__
            raise FetchError(f"no QUIC handshake with {target.authority}: {reason}") from None
    except BaseException:
        handshake.cancel()
        await connection.close()
        raise
    return connection
