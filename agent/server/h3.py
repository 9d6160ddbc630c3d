"""`h2iot-agent serve --protocol h3`: the workload's handler behind qh3's HTTP/3 server.

The same handlers and trial records as the HTTP/2 server (agent.server): a request becomes a
`Request`, its `Reply` a HEADERS frame and the body handed to QUIC a chunk at a time (flow
control paces it), and each connection's trials are accounted by agent.server.connection_trials
into the server's ledger. A handler answering `Streamed` gets the HTTP/2 server's exchanges
(agent.server.streamed) over HTTP/3's streams (agent.h3.wire); a handler's
enable_connect_protocol is announced as RFC 9220's, so WebSocket runs over an extended CONNECT
as over HTTP/2. What HTTP/3 adds to a trial's record is its `transport` (datagrams, loss, PTOs,
the credit the client granted, the node's UDP drops).

Hostile input stays bounded: datagrams that are not QUIC are counted and dropped, new
connections over `max_connections` are refused before any state is kept, and a connection
that stops reading is held to its flow-control windows and then its idle timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qh3._hazmat import pull_quic_header
from qh3.asyncio.protocol import QuicConnectionProtocol
from qh3.asyncio.server import QuicServer
from qh3.h3.events import DataReceived, H3Event, HeadersReceived, StopSending, StreamReset
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection
from qh3.quic.events import ConnectionTerminated, ProtocolNegotiated, QuicEvent
from qh3.quic.packet import QuicPacketType

from agent.errors import ProtocolCode
from agent.frames import FrameCounts
from agent.h3.amplification import AmplificationFixes, install_padding_credit
from agent.h3.credit import CreditLedger
from agent.h3.settings import QuicWindows
from agent.h3.stack import AnnouncingH3, TransportCounts, configuration, tap
from agent.h3.udp import SocketBuffers, rcvbuf_errors, udp_socket
from agent.h3.wire import STREAM_BUFFER_BYTES, H3Wire, close_code, h3_error_name
from agent.limits import DEFAULT_IDLE_TIMEOUT_S, default_max_connections
from agent.server.app import ServerApp, ServerOptions
from agent.server.connection_trials import ConnectionTrials
from agent.server.h3_lifecycle import ENDED, H3Lifecycle, Input, ended_reason
from agent.server.handler import SERVER_HEADER, Handler, Reply
from agent.server.request import Request
from agent.server.streamed import StreamedExchanges
from agent.trial_header import TRIAL_HEADER
from agent.trial_log import TrialLog
from agent.workloads import DEFAULT_KIND

log = logging.getLogger("h2iot.server.h3")

_TRIAL_HEADER = TRIAL_HEADER.encode()


@dataclass(frozen=True)
class H3ServeOptions:
    windows: QuicWindows
    cert: Path
    key: Path
    host: str = "127.0.0.1"
    port: int = 8443
    trial_log: Path | None = None
    workload: str = DEFAULT_KIND
    fixes: AmplificationFixes = field(default_factory=AmplificationFixes)
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = field(default_factory=default_max_connections)
    buffer_bytes: int | None = None  # socket buffers asked each way; None: agent.h3.udp's


@dataclass
class InputCounts:
    """The listening socket's datagrams since the server started, and those it turned away
    (each trial's record carries the running totals)."""

    datagrams: int = 0
    not_quic: int = 0  # no QUIC header could be read
    shed_connections: int = 0  # half-open connections closed to make room for a new one
    refused_connections: int = 0  # a new connection's Initial with no room to be made

    def to_dict(self) -> dict[str, int]:
        return {
            "datagrams": self.datagrams,
            "not_quic": self.not_quic,
            "shed_connections": self.shed_connections,
            "refused_connections": self.refused_connections,
        }


class QuicTally:
    """One direction of a connection in the frame-count shape the trial accounting subtracts:
    the datagrams and their UDP payload bytes, and the flow-control grants among the frames
    the client sent."""

    def __init__(self, counts: TransportCounts, credit: CreditLedger | None) -> None:
        self._counts = counts
        self._credit = credit

    def counts(self) -> FrameCounts:
        if self._credit is None:
            return FrameCounts(
                {"datagrams": self._counts.datagrams_sent}, {}, self._counts.bytes_sent
            )
        frames = {
            "datagrams": self._counts.datagrams_received,
            "MAX_STREAM_DATA": self._credit.stream_frames,
            "MAX_DATA": self._credit.connection_frames,
        }
        return FrameCounts(frames, {}, self._counts.bytes_received)


class H3Server:
    """The process's shared state for HTTP/3: the HTTP/2 server's handler and trial ledger
    (agent.server.app.ServerApp), the QUIC configuration and what the socket turned away."""

    def __init__(self, options: H3ServeOptions, trial_log: TrialLog, handler: Handler) -> None:
        self.options = options
        self.app = ServerApp(
            ServerOptions(host=options.host, port=options.port, workload=options.workload),
            trial_log,
            handler,
        )
        self.configuration = configuration(
            options.windows,
            is_client=False,
            idle_timeout_s=options.idle_timeout_s,
            cert=options.cert,
            key=options.key,
        )
        self.input = InputCounts()
        self.buffers: SocketBuffers | None = None
        extra: Mapping[str, int] = getattr(handler, "extra_settings", {})
        self.connect_protocol = bool(extra.get("enable_connect_protocol"))

    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        transport: Mapping[str, object],
    ) -> None:
        extra = {**transport, "listener": self.input.to_dict()}
        if self.buffers is not None:
            extra["socket_buffers"] = self.buffers.to_dict()
        self.app.trial_detach(trial_id, connection_id, sent, received, transport=extra)


class _TrialHost:
    """The ledger's host as one connection's ConnectionTrials sees it: the process's, with
    the connection's transport counts added to each trial that leaves it."""

    def __init__(self, server: H3Server, connection: H3ServerConnection) -> None:
        self._server = server
        self._connection = connection
        self._current: str | None = None

    def trial_request(self, trial_id: str, connection_id: int) -> None:
        if trial_id != self._current:
            self._current = trial_id
            self._connection.trial_begins()
        self._server.app.trial_request(trial_id, connection_id)

    def trial_responses_done(self, trial_ids: Sequence[str]) -> None:
        self._server.app.trial_responses_done(trial_ids)

    def trial_stream_reset(self, trial_id: str) -> None:
        self._server.app.trial_stream_reset(trial_id)

    def trial_detach(
        self, trial_id: str, connection_id: int, sent: FrameCounts, received: FrameCounts
    ) -> None:
        transport = self._connection.trial_transport()
        self._server.trial_detach(trial_id, connection_id, sent, received, transport)


class H3ServerConnection(QuicConnectionProtocol):
    """One QUIC connection: HTTP/3 requests to the handler, replies back, trials accounted."""

    def __init__(self, quic: Any, *, server: H3Server, **kwargs: Any) -> None:
        self._server = server
        self._credit = CreditLedger()
        self._counts = TransportCounts()
        fixes = server.options.fixes
        self._tapped = tap(quic, self._credit, self._counts, fixes.capacity_as_blocked)
        super().__init__(self._tapped, **kwargs)
        self.id = server.app.next_connection_id()
        self._h3: AnnouncingH3 | None = None
        self._wire: H3Wire | None = None
        self.peer = "?"
        self.trials = ConnectionTrials(
            _TrialHost(server, self),
            self.id,
            QuicTally(self._counts, None),
            QuicTally(self._counts, self._credit),
        )
        self._sending: set[int] = set()  # streams whose Reply the core still buffers
        self._unsent: dict[int, memoryview] = {}  # the rest of a Reply not handed to qh3 yet
        self.streamed = StreamedExchanges(self)
        self._kicked = False
        self._marks = (0, 0, rcvbuf_errors())
        self.lifecycle = H3Lifecycle()
        self._opened_s = time.monotonic()
        server.app.connection_opened(self)

    # What a trial that leaves this connection records beside its frame counts.

    def trial_begins(self) -> None:
        """A trial's first request on this connection: its counts start here (the handshake's
        count for the connection's first trial: its marks were taken when it opened)."""
        core = self._tapped.core
        self._credit.reset()
        if not self.lifecycle.advance(Input.TRIAL):
            self._marks = (core.loss_total, core.pto_total, rcvbuf_errors())

    def trial_transport(self) -> dict[str, object]:
        core = self._tapped.core
        loss, pto, drops = self._marks
        now_drops = rcvbuf_errors()
        credit = self._credit.summary()
        transport: dict[str, object] = {
            "protocol": "h3",
            "packets_lost": None if core is None else core.loss_total - loss,
            "pto_count": None if core is None else core.pto_total - pto,
            "udp_rcvbuf_errors": None if drops is None or now_drops is None else now_drops - drops,
            "capacity_blocked": self._counts.capacity_blocked,
            **credit.to_dict(),
        }
        self._credit.reset()
        return transport

    # What the exchanges ask of their connection (agent.server.streamed.ExchangeCarrier)

    @property
    def conn(self) -> H3Wire:
        assert self._wire is not None, "an exchange before the handshake"
        return self._wire

    def kick(self) -> None:
        """Send what the exchanges queued, once per event-loop turn."""
        if not self._kicked and self.lifecycle.state not in ENDED:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._kicked_transmit)

    def _kicked_transmit(self) -> None:
        self._kicked = False
        if self.lifecycle.state not in ENDED:
            self.transmit()

    def progressed(self) -> None:
        """Request body bytes arrived: QUIC's idle timer has seen them already."""

    # qh3's protocol

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        if self.peer == "?":
            self.peer = f"{addr[0]}:{addr[1]}"
        self._counts.datagrams_received += 1
        self._counts.bytes_received += len(data)
        super().datagram_received(data, addr)

    def datagrams_received(self, data: list[bytes], addr: Any) -> None:
        self._counts.datagrams_received += len(data)
        self._counts.bytes_received += sum(map(len, data))
        super().datagrams_received(data, addr)

    def quic_event_received(self, event: QuicEvent) -> None:
        if self.lifecycle.state in ENDED:
            return  # what qh3 still reports for a connection we are done with: nobody reads it
        if isinstance(event, ProtocolNegotiated):
            self.lifecycle.advance(Input.NEGOTIATED)
            options = self._server.options
            self._h3 = AnnouncingH3(
                self._quic, options.windows, connect_protocol=self._server.connect_protocol
            )
            self._wire = H3Wire(self._h3, self._quic)
        elif isinstance(event, ConnectionTerminated):
            code = close_code(event.error_code, event.frame_type)
            self._end(Input.TERMINATED, (code, event.reason_phrase))
            return
        if self._h3 is not None:
            for h3_event in self._h3.handle_event(event):
                self._h3_event(h3_event)

    def transmit(self) -> None:
        if self._unsent:
            self._feed()
        if self.streamed.sending:
            while self.streamed.send_round(STREAM_BUFFER_BYTES) is not None:
                pass
        super().transmit()
        if self._sending:
            core = self._tapped.core
            done = [
                s
                for s in self._sending
                if s not in self._unsent and (core is None or not core.get_send_buffer_size(s))
            ]
            for stream_id in done:
                self._sending.discard(stream_id)
                self.trials.response_done(stream_id)
                if core is not None:
                    core.forget_stream(stream_id)
            if done:
                self.trials.last_bytes_left()

    # HTTP/3

    def _h3_event(self, event: H3Event) -> None:
        streamed = self.streamed
        if isinstance(event, DataReceived):
            # A Reply's request body is dropped unread, as over HTTP/2.
            if streamed.by_stream:
                streamed.on_data(event.stream_id, event.data, len(event.data))
                if event.stream_ended:
                    streamed.on_body_end(event.stream_id)
        elif isinstance(event, HeadersReceived):
            if event.stream_id in streamed.by_stream:  # the request's trailers
                if event.stream_ended:
                    streamed.on_body_end(event.stream_id)
            else:
                self._request(event.stream_id, event.headers, event.stream_ended)
        elif isinstance(event, StreamReset | StopSending):
            stream_id = event.stream_id
            self._unsent.pop(stream_id, None)
            self._sending.discard(stream_id)
            if streamed.by_stream:
                streamed.on_reset(stream_id, h3_error_name(event.error_code))
            self.trials.stream_reset(stream_id)

    def _request(
        self, stream_id: int, header_list: list[tuple[bytes, bytes]], body_ended: bool
    ) -> None:
        assert self._h3 is not None
        headers = dict(header_list)
        trial_id = headers.get(_TRIAL_HEADER)
        if trial_id is not None:
            self.trials.request(stream_id, trial_id.decode("ascii", "replace"))
        request = Request(
            headers.get(b":method", b"GET"), headers.get(b":path", b"/").decode(), headers
        )
        answer = self._server.app.handle(request)
        if not isinstance(answer, Reply):
            self.streamed.start(request, stream_id, answer)
            if body_ended:
                self.streamed.on_body_end(stream_id)
            return
        reply = answer
        body = memoryview(b"") if request.method == b"HEAD" else reply.body
        self._h3.send_headers(
            stream_id,
            [
                (b":status", str(reply.status).encode()),
                (b"content-length", str(len(reply.body)).encode()),
                *reply.headers,
                SERVER_HEADER,
            ],
            end_stream=not body,
        )
        if body:
            self._unsent[stream_id] = body
        self._sending.add(stream_id)
        self.transmit()

    def _feed(self) -> None:
        """A chunk more of each body whose stream qh3 holds less than a chunk of."""
        assert self._h3 is not None
        core = self._tapped.core
        for stream_id, body in list(self._unsent.items()):
            if core is not None and core.get_send_buffer_size(stream_id) >= STREAM_BUFFER_BYTES:
                continue
            chunk, rest = body[:STREAM_BUFFER_BYTES], body[STREAM_BUFFER_BYTES:]
            self._h3.send_data(stream_id, chunk, end_stream=not rest)
            if rest:
                self._unsent[stream_id] = rest
            else:
                del self._unsent[stream_id]

    def _end(self, ending: Input, close: tuple[ProtocolCode, str] | None) -> None:
        """The connection is over (`close`: how qh3 ended it; None: we did): its trials are
        recorded and why it ended is one debug line."""
        state = self.lifecycle.state
        if not self.lifecycle.advance(ending):
            return
        log.debug("peer %s: connection ended: %s", self.peer, ended_reason(state, close))
        self._unsent.clear()
        self.streamed.close_all("the connection went away")
        self.trials.finish()
        self._server.app.connection_closed(self, failed=False)

    # HostedConnection (the server's drain on shutdown)

    @property
    def sheddable(self) -> bool:
        """Only a connection still in its handshake: an Initial flood sheds its own."""
        return not self._connected

    @property
    def last_progress_s(self) -> float:
        return self._opened_s

    def drain(self) -> None:
        self.close()
        self._end(Input.DRAIN, None)

    def shed(self) -> None:
        self.drain()


class BoundedQuicServer(QuicServer):
    """qh3's server (connection IDs, version negotiation, Retry) behind a gate that counts and
    drops what is not QUIC and refuses new connections over the cap before any state is kept."""

    def __init__(self, server: H3Server, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._h3_server = server

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        counts = self._h3_server.input
        counts.datagrams += 1
        assert isinstance(data, bytes)
        try:
            header = pull_quic_header(data, 0, self._configuration.connection_id_length)
        except ValueError:
            counts.not_quic += 1
            return
        if header[3] not in self._protocols and header[1] == int(QuicPacketType.INITIAL):
            app = self._h3_server.app
            over = len(app.connections) - self._h3_server.options.max_connections + 1
            if over > 0:
                before = len(app.connections)
                app.make_room(over)
                counts.shed_connections += before - len(app.connections)
                if len(app.connections) >= self._h3_server.options.max_connections:
                    counts.refused_connections += 1
                    return
        super().datagram_received(data, addr)


def warm_up(config: QuicConfiguration) -> None:
    """Answer one throwaway client's Initial, sent nowhere: qh3 initialises its TLS machinery
    on a process's first connection (about 23 ms of CPU here), which would otherwise fall in
    the first trial this server serves after each restart."""
    client_config = configuration(
        QuicWindows(65535, 65535), is_client=True, idle_timeout_s=1.0, insecure=True
    )
    client = QuicConnection(configuration=client_config)
    now = time.monotonic()
    client.connect(("127.0.0.1", 9), now=now)  # the discard port; nothing is sent
    initial = client.datagrams_to_send(now=now)[0][0]
    cid = pull_quic_header(initial, 0, config.connection_id_length)[3]
    throwaway = QuicConnection(configuration=config, original_destination_connection_id=cid)
    throwaway.receive_datagram(initial, ("127.0.0.1", 9), now)
    throwaway.datagrams_to_send(now=now)


async def serve_h3(options: H3ServeOptions, handler: Handler) -> int:
    """Serve HTTP/3 until SIGTERM/SIGINT, then close every connection (their trials' records
    are written) and exit."""
    if options.fixes.count_padding:
        install_padding_credit()
    # qh3 logs every peer's close, a clean one included, as a warning: a server's stderr would
    # fill with one line per trial. Its errors still show.
    logging.getLogger("quic").setLevel(logging.ERROR)
    trial_log = TrialLog(options.trial_log)
    server = H3Server(options, trial_log, handler)
    warm_up(server.configuration)
    kwargs = {} if options.buffer_bytes is None else {"buffer_bytes": options.buffer_bytes}
    sock, server.buffers = udp_socket(options.host, options.port, **kwargs)
    loop = asyncio.get_running_loop()
    transport, quic_server = await loop.create_datagram_endpoint(
        lambda: BoundedQuicServer(
            server,
            configuration=server.configuration,
            create_protocol=lambda quic, **kw: H3ServerConnection(quic, server=server, **kw),
            retry=options.fixes.retry,
        ),
        sock=sock,
    )
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    address, port = sock.getsockname()[:2]
    print(
        json.dumps(
            {
                "event": "listening",
                "scheme": "https",
                "protocol": "h3",
                "address": f"{address}:{port}",
                "port": port,
                "max_connections": options.max_connections,
                "idle_timeout_s": options.idle_timeout_s,
                "amplification_fixes": options.fixes.to_dict(),
                "socket_buffers": server.buffers.to_dict(),
                "announced": options.windows.announced(),
                "datagram_bytes": options.windows.datagram_bytes,
            }
        ),
        file=sys.stderr,
        flush=True,
    )
    log.info("serving HTTP/3 on %s:%s (UDP)", address, port)
    try:
        await stop.wait()
    finally:
        for connection in list(server.app.connections):
            connection.drain()
        await asyncio.sleep(0)  # let the CONNECTION_CLOSE frames go out
        quic_server.close()  # type: ignore[no-untyped-call]
        transport.close()
        trial_log.close()
    return 0
