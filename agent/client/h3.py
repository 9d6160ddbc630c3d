"""The client's HTTP/3 connection: what a trial's session asks of a connection
(agent.client.trial.TrialSession: GETs tagged with the trial, the server's stream limit, the
record's counts), over qh3.

A connection is one trial's, as over HTTP/2: made at the trial's start, its handshake timed as
the trial's connect, closed at its end. Its `transport` counts go into the trial's record.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from qh3.asyncio._transport import create_optimized_datagram_transport
from qh3.asyncio.protocol import QuicConnectionProtocol
from qh3.h3.connection import Setting
from qh3.h3.events import DataReceived, HeadersReceived
from qh3.quic.connection import QuicConnection
from qh3.quic.events import ConnectionTerminated, QuicEvent

from agent.client.connect import Target
from agent.client.connection import Response, get_headers
from agent.client.options import TrialOptions
from agent.errors import FetchError, PeerProtocolError
from agent.frames import FrameCounts
from agent.h3.credit import CreditLedger
from agent.h3.settings import QuicWindows
from agent.h3.stack import AnnouncingH3, TappedQuicConnection, TransportCounts, configuration, tap
from agent.h3.udp import SocketBuffers, rcvbuf_errors, udp_socket

# The peer's HTTP/3 SETTINGS under the names the records use.
_PEER_SETTING_NAMES: dict[int, str] = {
    Setting.QPACK_MAX_TABLE_CAPACITY: "header_table_size",
    Setting.MAX_FIELD_SECTION_SIZE: "max_header_list_size",
    Setting.QPACK_BLOCKED_STREAMS: "qpack_blocked_streams",
    Setting.ENABLE_CONNECT_PROTOCOL: "enable_connect_protocol",
    Setting.H3_DATAGRAM: "h3_datagram",
}
_IDLE_TIMEOUT_S = 30.0


class _QuicClientProtocol(QuicConnectionProtocol):
    """qh3's datagram protocol for one connection, counting datagrams, events to `on_event`."""

    def __init__(self, quic: TappedQuicConnection, counts: TransportCounts) -> None:
        super().__init__(quic)
        self.tapped = quic
        self.counts = counts
        self.on_event: Callable[[QuicEvent], None] = lambda event: None
        # The socket's first error (ICMP port unreachable: nothing listens on the UDP port).
        self.refused: asyncio.Future[OSError] = asyncio.get_running_loop().create_future()

    @property
    def handshake_done(self) -> bool:
        return bool(self._connected)

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        self.counts.datagrams_received += 1
        self.counts.bytes_received += len(data)
        super().datagram_received(data, addr)

    def datagrams_received(self, data: list[bytes], addr: Any) -> None:
        self.counts.datagrams_received += len(data)
        self.counts.bytes_received += sum(map(len, data))
        super().datagrams_received(data, addr)

    def quic_event_received(self, event: QuicEvent) -> None:
        self.on_event(event)

    def error_received(self, exc: Exception) -> None:
        """The socket is connected to the server's address, so a host with nothing on that
        UDP port answers with ICMP and the kernel says so here: the handshake fails now, not
        at the trial's timeout."""
        if isinstance(exc, OSError) and not self.refused.done():
            self.refused.set_result(exc)


class H3ClientConnection:
    """GETs over one QUIC connection, each response's body hashed as it arrives."""

    def __init__(
        self,
        protocol: _QuicClientProtocol,
        transport: asyncio.BaseTransport,
        windows: QuicWindows,
        buffers: SocketBuffers,
    ) -> None:
        self._protocol = protocol
        self._transport = transport
        self.windows = windows
        self.buffers = buffers
        self._quic = protocol.tapped
        self._h3 = AnnouncingH3(self._quic, windows)
        self._responses: dict[int, tuple[Response, asyncio.Future[Response]]] = {}
        self._settings: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A connection lost before its SETTINGS fails the future whether or not a trial waits.
        self._settings.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._lost: str | None = None
        self._rcvbuf_errors_at_start = rcvbuf_errors()
        self.local_settings: Mapping[str, int] = windows.announced()
        protocol.on_event = self._event

    @property
    def lost_reason(self) -> str | None:
        """Why the connection ended, once it has."""
        return self._lost

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
        keep_body: bool = False,
    ) -> asyncio.Future[Response]:
        if self._lost is not None:
            raise PeerProtocolError(self._lost)
        stream_id = self._quic.get_next_available_stream_id()
        headers = get_headers(authority, scheme, path, extra_headers)
        self._h3.send_headers(stream_id, headers, end_stream=True)
        response = Response.of_get(path, keep_body)
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._responses[stream_id] = (response, future)
        self._protocol.transmit()
        return future

    def open_exchange(self, *args: Any, **kwargs: Any) -> Any:
        raise FetchError("a streamed exchange is not available over HTTP/3 in this agent")

    async def settings_received(self) -> None:
        await self._settings

    @property
    def peer_max_concurrent_streams(self) -> int:
        return self._quic.max_concurrent_bidi_streams

    def peer_settings(self) -> dict[str, int]:
        received = self._h3.received_settings or {}
        return {_PEER_SETTING_NAMES.get(k, f"0x{k:x}"): v for k, v in sorted(received.items())}

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

    def transport_record(self) -> dict[str, object]:
        """The connection's QUIC counts so far, for the trial's record."""
        core = self._quic.core
        start, now = self._rcvbuf_errors_at_start, rcvbuf_errors()
        return {
            "protocol": "h3",
            "datagram_bytes": self.windows.datagram_bytes,
            "connection_window_bytes": self.windows.connection_window_bytes,
            "packets_lost": None if core is None else core.loss_total,
            "pto_count": None if core is None else core.pto_total,
            "udp_rcvbuf_errors": None if start is None or now is None else now - start,
            "smoothed_rtt_s": None if core is None else core.smoothed_rtt,
            "socket_buffers": self.buffers.to_dict(),
        }

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
        for h3_event in self._h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived | DataReceived):
                self._h3_event(h3_event)
        if not self._settings.done() and self._h3.received_settings is not None:
            self._settings.set_result(None)

    def _h3_event(self, event: HeadersReceived | DataReceived) -> None:
        entry = self._responses.get(event.stream_id)
        if entry is None:
            return
        response, future = entry
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
                    self._fail(event.stream_id, f"GET {response.path}: a :status that is no number")
                    return
        else:
            response.size_bytes += len(event.data)
            response.digest.update(event.data)
            if response.body is not None:
                response.body += event.data
        if event.stream_ended:
            response.t_end_ns = time.monotonic_ns()
            del self._responses[event.stream_id]
            if not future.done():
                future.set_result(response)

    def _fail(self, stream_id: int, reason: str) -> None:
        _response, future = self._responses.pop(stream_id)
        if not future.done():
            future.set_exception(PeerProtocolError(reason))

    def _lose(self, event: ConnectionTerminated) -> None:
        reason = event.reason_phrase or "no reason given"
        self._lost = f"the QUIC connection closed (error 0x{event.error_code:x}: {reason})"
        for _response, future in self._responses.values():
            if not future.done():
                future.set_exception(PeerProtocolError(self._lost))
        self._responses.clear()
        if not self._settings.done():
            self._settings.set_exception(PeerProtocolError(self._lost))


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


async def open_h3_connection(
    target: Target, options: TrialOptions, windows: QuicWindows, buffer_bytes: int | None = None
) -> H3ClientConnection:
    """A QUIC connection to `target`, handshake done (HTTP/3 is always https)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(target.host, target.port, type=socket.SOCK_DGRAM)
    except OSError as exc:
        raise FetchError(f"cannot resolve {target.host}: {exc.strerror or exc}") from None
    address = infos[0][4]
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
    counts = TransportCounts()
    quic = tap(QuicConnection(configuration=config), CreditLedger(), counts, False)
    transport, protocol = await create_optimized_datagram_transport(
        loop, lambda: _QuicClientProtocol(quic, counts), sock=sock
    )
    assert isinstance(protocol, _QuicClientProtocol)
    connection = H3ClientConnection(protocol, transport, windows, buffers)
    protocol.connect(address[:2])
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
