"""One HTTP/3 server connection (agent.server.h3 serves them): qh3's protocol around its QUIC
connection, requests to the workload's handler and replies back, each connection's trials
accounted into the server's ledger with the QUIC counts HTTP/3 adds to a trial's record."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from qh3.asyncio.protocol import QuicConnectionProtocol
from qh3.h3.events import DataReceived, H3Event, HeadersReceived, StopSending, StreamReset
from qh3.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    ProtocolNegotiated,
    QuicEvent,
)

from agent.errors import ProtocolCode
from agent.h3.credit import CreditLedger
from agent.h3.protocol import H3
from agent.h3.settings import QuicWindows
from agent.h3.stack import AnnouncingH3, TransportCounts, settings_exchange, tap
from agent.h3.trace import connection_trace
from agent.h3.udp import rcvbuf_errors
from agent.h3.wire import STREAM_BUFFER_BYTES, H3Wire, close_code, h3_error_name
from agent.protocols.in_force import SettingsExchange
from agent.server.app import ServerApp
from agent.server.connection_trials import ConnectionTrials
from agent.server.h3_lifecycle import ENDED, H3Lifecycle, Input, ended_reason
from agent.server.handler import TOO_EARLY, Reply, acts_early
from agent.server.ledger import Note
from agent.server.request import Request
from agent.server.streamed import StreamedExchanges
from agent.traffic import FrameCounts
from agent.trial_header import TRIAL_CONTINUES_HEADER, TRIAL_HEADER

log = logging.getLogger("h2iot.server.h3")

_TRIAL_HEADER = TRIAL_HEADER.encode()
_CONTINUES_HEADER = TRIAL_CONTINUES_HEADER.encode()


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


class H3Host(Protocol):
    """What an HTTP/3 connection asks of its server (agent.server.h3.H3Server), as
    agent.server.host.ConnectionHost is HTTP/2's."""

    @property
    def app(self) -> ServerApp: ...

    @property
    def windows(self) -> QuicWindows: ...

    @property
    def connect_protocol(self) -> bool: ...

    @property
    def capacity_as_blocked(self) -> bool: ...

    def handshake_began(self, connection: H3ServerConnection) -> None: ...

    def early_request(self, accepted: bool) -> None:
        """A request came in 0-RTT early data, and was acted on or refused (425)."""
        ...

    def handshake_done(self, connection: H3ServerConnection) -> None:
        """Its handshake completed, or it ended first; either may come twice."""

    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        transport: Mapping[str, object],
        *,
        settings: SettingsExchange | None,
    ) -> None: ...


class _TrialHost:
    """The ledger's host as one connection's ConnectionTrials sees it: the process's, with
    the connection's transport counts added to each trial that leaves it."""

    def __init__(self, server: H3Host, connection: H3ServerConnection) -> None:
        self._server = server
        self._connection = connection
        self._current: str | None = None

    @property
    def controlled_trial(self) -> str | None:
        return self._server.app.controlled_trial

    def trial_request(self, trial_id: str, connection_id: int) -> None:
        if trial_id != self._current:
            self._current = trial_id
            self._connection.trial_begins()
        self._server.app.trial_request(trial_id, connection_id)

    def trial_responses_done(self, trial_ids: Sequence[str]) -> None:
        self._server.app.trial_responses_done(trial_ids)

    def trial_stream_reset(self, trial_id: str) -> None:
        self._server.app.trial_stream_reset(trial_id)

    def trial_noted(self, trial_id: str, note: Note) -> None:
        self._server.app.trial_noted(trial_id, note)

    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        *,
        settings: SettingsExchange | None,
    ) -> None:
        transport = self._connection.trial_transport()
        self._server.trial_detach(
            trial_id, connection_id, sent, received, transport, settings=settings
        )


class H3ServerConnection(QuicConnectionProtocol):
    """One QUIC connection: HTTP/3 requests to the handler, replies back, trials accounted."""

    def __init__(self, quic: Any, *, server: H3Host, **kwargs: Any) -> None:
        self._server = server
        self._credit = CreditLedger()
        self._counts = TransportCounts()
        self._tapped = tap(quic, self._credit, self._counts, server.capacity_as_blocked)
        super().__init__(self._tapped, **kwargs)
        self.id = server.app.next_connection_id()
        self._h3: AnnouncingH3 | None = None
        self._wire: H3Wire | None = None
        self.peer = "?"
        self._traces = server.app.options.traces
        self._trace = None if self._traces is None else connection_trace(quic)
        self.trials = ConnectionTrials(
            _TrialHost(server, self),
            self.id,
            QuicTally(self._counts, None),
            QuicTally(self._counts, self._credit),
            self._settings_exchange,
            on_finish=None if self._trace is None else self._write_trace,
        )
        self._sending: set[int] = set()  # streams whose Reply the core still buffers
        self._unsent: dict[int, memoryview] = {}  # the rest of a Reply not handed to qh3 yet
        self.streamed = StreamedExchanges(self)
        self._kicked = False
        self._marks = (0, 0, rcvbuf_errors())
        self.lifecycle = H3Lifecycle()
        # Until then, requests arrive in 0-RTT early data (replayable: RFC 8470).
        self._handshake_completed = False
        self._opened_s = time.monotonic()
        server.app.connection_opened(self)
        server.handshake_began(self)

    # What a trial that leaves this connection records beside its frame counts.

    def trial_begins(self) -> None:
        """A trial's first request on this connection: its counts start here (the handshake's
        count for the connection's first trial: its marks were taken when it opened)."""
        core = self._tapped.core
        self._credit.reset()
        if not self.lifecycle.advance(Input.TRIAL):
            self._marks = (core.loss_total, core.pto_total, rcvbuf_errors())

    def _write_trace(self, trial_id: str) -> None:
        """qh3's events since the last trial left (the handshake's for the first trial), as
        the trial's trace."""
        assert self._trace is not None and self._traces is not None
        self._traces.write_wall_clock(trial_id, self._trace.take())

    def _settings_exchange(self) -> SettingsExchange | None:
        """What the connection announced and received; None before its HTTP/3 layer exists."""
        return None if self._h3 is None else settings_exchange(self._tapped, self._h3)

    def trial_transport(self) -> dict[str, object]:
        core = self._tapped.core
        loss, pto, drops = self._marks
        now_drops = rcvbuf_errors()
        credit = self._credit.summary()
        transport: dict[str, object] = {
            "protocol": H3.name,
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
            self._h3 = AnnouncingH3(
                self._quic, self._server.windows, connect_protocol=self._server.connect_protocol
            )
            self._wire = H3Wire(self._h3, self._quic)
        elif isinstance(event, HandshakeCompleted):
            self._handshake_completed = True
            if event.session_resumed:
                self.trials.handshake_resumed()
            self._server.handshake_done(self)
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
        self.trials.request(
            stream_id,
            None if trial_id is None else trial_id.decode("ascii", "replace"),
            continues=_CONTINUES_HEADER in headers,
        )
        request = Request(
            headers.get(b":method", b"GET"),
            headers.get(b":path", b"/").decode(),
            headers,
            early_data=not self._handshake_completed,
        )
        acted = acts_early(request)
        if request.early_data:
            self.trials.early_data(stream_id, accepted=acted)
            self._server.early_request(accepted=acted)
        answer = self._server.app.handle(request) if acted else TOO_EARLY
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
        self._server.handshake_done(self)
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
        """Dropped half-open (room for a new connection, or its handshake overdue): its state
        goes without a CONNECTION_CLOSE (agent.h3.admission), qh3's timer and its connection
        IDs with it, so nothing is sent to its peer again (qh3's protocol's own attributes:
        qh3 is pinned)."""
        self._end(Input.DRAIN, None)
        for handle in (self._timer, self._transmit_task):
            if handle is not None:
                handle.cancel()
        self._timer = self._transmit_task = None
        self._connection_terminated_handler()  # qh3's server forgets its connection IDs
