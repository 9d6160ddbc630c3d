"""`h2iot-agent serve --protocol h3`: the workload's handler behind qh3's HTTP/3 server. Here
the process's side (the listening socket's gate, its shared state, start and shutdown); each
connection is agent.server.h3_connection's.

The same handlers and trial records as the HTTP/2 server (agent.server): a request becomes a
`Request`, its `Reply` a HEADERS frame and the body handed to QUIC a chunk at a time (flow
control paces it), and each connection's trials are accounted by agent.server.connection_trials
into the server's ledger. A handler answering `Streamed` gets the HTTP/2 server's exchanges
(agent.server.streamed) over HTTP/3's streams (agent.h3.wire); a handler's
enable_connect_protocol is announced as RFC 9220's, so WebSocket runs over an extended CONNECT
as over HTTP/2. What HTTP/3 adds to a trial's record is its `transport` (datagrams, loss, PTOs,
the credit the client granted, the node's UDP drops).

Hostile input stays bounded: datagrams that are not QUIC are counted and dropped; connections
still in their handshake are held to `max_handshakes` and `handshake_timeout_s`, all of them to
`max_connections` (agent.h3.admission derives the caps from the node's memory), the oldest
half-open one dropped for a new one and a new one refused before any state is kept when every
connection held is open; and a connection that stops reading is held to its flow-control
windows and then its idle timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qh3._hazmat import pull_quic_header
from qh3.asyncio.protocol import QuicConnectionProtocol
from qh3.asyncio.server import QuicServer
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection
from qh3.quic.packet import QuicPacketType

from agent.event_loop import running_loop_name
from agent.event_trace import TraceWriter
from agent.h3.admission import H3Limits, Handshakes
from agent.h3.amplification import AmplificationFixes, install_padding_credit
from agent.h3.protocol import H3
from agent.h3.settings import QuicWindows
from agent.h3.stack import configuration
from agent.h3.tickets import DEFAULT_LIFETIME_S, TicketStore
from agent.h3.trace import TrialQuicLogger
from agent.h3.udp import SocketBuffers, datagram_transport, udp_socket
from agent.limits import DEFAULT_IDLE_TIMEOUT_S
from agent.protocols.in_force import SettingsExchange
from agent.server.app import ServerApp, ServerOptions
from agent.server.control import announced, open_control
from agent.server.h3_connection import H3ServerConnection
from agent.server.handler import Handler
from agent.traffic import FrameCounts
from agent.trial_log import TrialLog
from agent.workloads import DEFAULT_KIND

log = logging.getLogger("h2iot.server.h3")

# RFC 9000 section 14.1: a client's Initial comes in a datagram of at least 1,200 bytes; qh3's
# server makes no connection for a smaller one.
_MIN_INITIAL_BYTES = 1200


@dataclass(frozen=True)
class H3ServeOptions:
    windows: QuicWindows
    cert: Path
    key: Path
    limits: H3Limits
    host: str = "127.0.0.1"
    port: int = 8443
    trial_log: Path | None = None
    workload: str = DEFAULT_KIND
    fixes: AmplificationFixes = field(default_factory=AmplificationFixes)
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    buffer_bytes: int | None = None  # socket buffers asked each way; None: agent.h3.udp's
    ticket_lifetime_s: float = DEFAULT_LIFETIME_S  # agent.h3.tickets
    traces: TraceWriter | None = None  # each trial's qh3 events, written as it leaves
    control_port: int | None = None  # listen for trial-control messages (agent.server.control)


@dataclass
class InputCounts:
    """The listening socket's datagrams since the server started, and those it turned away
    (each trial's record carries the running totals)."""

    datagrams: int = 0
    not_quic: int = 0  # no QUIC header could be read
    shed_connections: int = 0  # half-open connections dropped to make room for a new one
    refused_connections: int = 0  # a new connection's Initial with no room to be made
    expired_handshakes: int = 0  # half-open connections dropped at their handshake timeout

    def to_dict(self) -> dict[str, int]:
        return {
            "datagrams": self.datagrams,
            "not_quic": self.not_quic,
            "shed_connections": self.shed_connections,
            "refused_connections": self.refused_connections,
            "expired_handshakes": self.expired_handshakes,
        }


class H3Server:
    """The process's shared state for HTTP/3: the HTTP/2 server's handler and trial ledger
    (agent.server.app.ServerApp), the QUIC configuration and what the socket turned away."""

    def __init__(self, options: H3ServeOptions, trial_log: TrialLog, handler: Handler) -> None:
        self.options = options
        self.app = ServerApp(
            ServerOptions(
                host=options.host,
                port=options.port,
                workload=options.workload,
                traces=options.traces,
            ),
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
        if options.traces is not None:
            # Each connection's own trace, handed out a trial at a time (agent.h3.trace); with
            # a logger, qh3's stack leaves its batch fast path (agent.h3.stack).
            self.configuration.quic_logger = TrialQuicLogger()
        self.input = InputCounts()
        # Session tickets issued to clients, each resuming one handshake (and its 0-RTT).
        self.tickets = TicketStore(time.monotonic, options.ticket_lifetime_s)
        self.buffers: SocketBuffers | None = None
        extra: Mapping[str, int] = getattr(handler, "extra_settings", {})
        self.connect_protocol = bool(extra.get("enable_connect_protocol"))
        self.handshakes: Handshakes[H3ServerConnection] = Handshakes(
            options.limits.handshake_timeout_s
        )
        self._loop = asyncio.get_running_loop()
        self._expiry: asyncio.TimerHandle | None = None  # the oldest handshake's deadline

    def admit(self) -> bool:
        """Whether a new connection may be made now, after dropping the half-open
        connections that are overdue or must make room for it."""
        counts, limits = self.input, self.options.limits
        self._drop_overdue()
        for connection in self.handshakes.oldest(len(self.handshakes) - limits.max_handshakes + 1):
            connection.shed()
            counts.shed_connections += 1
        over = len(self.app.connections) - limits.max_connections + 1
        if over > 0:
            before = len(self.app.connections)
            self.app.make_room(over)
            counts.shed_connections += before - len(self.app.connections)
        return len(self.app.connections) < limits.max_connections

    def _drop_overdue(self) -> None:
        for connection in self.handshakes.expired(self._loop.time()):
            connection.shed()
            self.input.expired_handshakes += 1

    def _expire_due(self) -> None:
        """The oldest handshake's deadline: the overdue ones go, without waiting for a new
        connection to make them."""
        self._expiry = None
        self._drop_overdue()
        self._arm_expiry()

    def _arm_expiry(self) -> None:
        expiry_s = self.handshakes.next_expiry_s()
        if self._expiry is None and expiry_s is not None:
            self._expiry = self._loop.call_at(expiry_s, self._expire_due)

    # What its connections ask of it besides (agent.server.h3_connection.H3Host)

    @property
    def windows(self) -> QuicWindows:
        return self.options.windows

    @property
    def capacity_as_blocked(self) -> bool:
        return self.options.fixes.capacity_as_blocked

    def handshake_began(self, connection: H3ServerConnection) -> None:
        self.handshakes.opened(connection, self._loop.time())
        self._arm_expiry()

    def handshake_done(self, connection: H3ServerConnection) -> None:
        self.handshakes.done(connection)

    def early_request(self, accepted: bool) -> None:
        counts = self.tickets.counts
        if accepted:
            counts.early_accepted += 1
        else:
            counts.early_refused += 1

    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        transport: Mapping[str, object],
        *,
        settings: SettingsExchange | None,
    ) -> None:
        extra = {
            **transport,
            "listener": self.input.to_dict(),
            "resumption": self.tickets.counts.to_dict(),
        }
        if self.buffers is not None:
            extra["socket_buffers"] = self.buffers.to_dict()
        self.app.trial_detach(
            trial_id, connection_id, sent, received, transport=extra, settings=settings
        )


class BoundedQuicServer(QuicServer):
    """qh3's server (connection IDs, version negotiation, Retry) behind a gate that counts and
    drops what is not QUIC and admits a new connection only within the caps (H3Server.admit),
    before qh3 keeps any state for it."""

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
        # What qh3 makes a connection of: an Initial of a full datagram's size to an unknown
        # connection ID. Anything else creates no state here and takes no one's room.
        if (
            header[3] not in self._protocols
            and header[1] == int(QuicPacketType.INITIAL)
            and len(data) >= _MIN_INITIAL_BYTES
            and not self._h3_server.admit()
        ):
            counts.refused_connections += 1
            return
        super().datagram_received(data, addr)

    def datagrams_received(self, datagrams: list[bytes], addr: Any) -> None:
        """A batch from one sender (the transport's): each run of short-header packets to
        one known connection goes to it whole (one receive, one transmit for the run);
        anything else, datagram by datagram, through the gate above. A short header is where
        qh3's server looks up nothing but the connection ID."""
        protocols = self._protocols
        cid_end = 1 + self._configuration.connection_id_length
        run: list[bytes] = []
        owner: QuicConnectionProtocol | None = None
        for data in datagrams:
            short = data and not data[0] & 0x80  # an empty datagram is the gate's to count
            protocol = protocols.get(data[1:cid_end]) if short else None
            if protocol is not owner or protocol is None:
                self._deliver(owner, run, addr)
                run = []
                owner = protocol
            if protocol is None:
                self.datagram_received(data, addr)
            else:
                run.append(data)
        self._deliver(owner, run, addr)

    def _deliver(
        self, protocol: QuicConnectionProtocol | None, run: list[bytes], addr: Any
    ) -> None:
        if protocol is not None and run:
            self._h3_server.input.datagrams += len(run)
            protocol.datagrams_received(run, addr)


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
    # qh3's batched transport: each connection's datagrams leave in one GSO send, not a
    # sendto apiece (most of what a page cost this server beyond qh3's core).
    quic_server = BoundedQuicServer(
        server,
        configuration=server.configuration,
        create_protocol=lambda quic, **kw: H3ServerConnection(quic, server=server, **kw),
        retry=options.fixes.retry,
        session_ticket_handler=server.tickets.add,
        session_ticket_fetcher=server.tickets.pop,
    )
    transport, _ = await datagram_transport(lambda: quic_server, sock)
    control = await open_control(server.app, options.host, options.control_port)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    address, port = sock.getsockname()[:2]
    print(
        json.dumps(
            {
                "event": "listening",
                "scheme": "https",
                "protocol": H3.name,
                "address": f"{address}:{port}",
                "port": port,
                "event_loop": running_loop_name(),
                **options.limits.to_dict(),
                "idle_timeout_s": options.idle_timeout_s,
                "ticket_lifetime_s": options.ticket_lifetime_s,
                "amplification_fixes": options.fixes.to_dict(),
                "socket_buffers": server.buffers.to_dict(),
                "announced": options.windows.announced(),
                "datagram_bytes": options.windows.datagram_bytes,
                **announced(control),
            }
        ),
        file=sys.stderr,
        flush=True,
    )
    log.info("serving HTTP/3 on %s:%s (UDP)", address, port)
    try:
        await stop.wait()
    finally:
        if control is not None:
            control.close()
        for connection in list(server.app.connections):
            connection.drain()
        await asyncio.sleep(0)  # let the CONNECTION_CLOSE frames go out
        quic_server.close()  # type: ignore[no-untyped-call]
        transport.close()
        server.app.close_lingering()
        trial_log.close()
    return 0
