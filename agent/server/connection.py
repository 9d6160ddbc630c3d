"""One HTTP/2 server connection: asyncio's Protocol around h2's sans-IO H2Connection.

The hot path (a WINDOW_UPDATE arrives, DATA goes out) is kept short: the kernel reads into a
`FrameReader` buffer; WINDOW_UPDATE frames for the connection and for streams being sent are
applied straight to h2's window counters, and DATA frames other than a body's last are built
by the connection's `ReplySender` (agent.server.sender), their size taken off the same
counters, so h2's flow-control view stays exact while its per-frame machinery is skipped.
Everything else (and any WINDOW_UPDATE h2 must judge: zero increment or reserved bit set,
overflow, odd length, unknown stream) goes to h2 unchanged, in order, and a body's last frame
goes through h2 so it closes the stream. Every stream with credit gets one frame per round
(fair, like nghttp2), and all frames produced by one read leave in one transport.write.

The connection knows its server only as a `ConnectionHost` (agent.server.host): what to
announce, who answers requests, where trial accounting goes, the limits it holds to
(agent.limits). Its lifecycle is one state (agent.server.lifecycle); the one flag beside
it, the sender's `paused`, is the transport's write back-pressure, which comes and goes in any
state.

A handler answering `Streamed` gets a `ServerExchange` for its stream (agent.server.streamed
holds them and their handlers): the stream's DATA goes to the exchange (credited when the
handler takes it), and what the handler queues goes out through h2 in the same rounds as the
fast path's frames, one frame per stream per round. The fast path above is only for `Reply`
streams. Which trial each stream serves, and what the connection carried for it, is
agent.server.connection_trials'.

Two timers bound how long a peer can hold the connection without using it: the handshake
deadline until the peer's preface and first SETTINGS frame are in, then the idle timeout, which
counts from the last progress (a request or request body bytes received, response bytes sent),
never from PINGs or other frames.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

import h2.events as ev
from h2.connection import ConnectionState
from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError
from hyperframe.frame import GoAwayFrame

from agent.errors import ProtocolCode
from agent.event_trace import TraceWriter
from agent.exchange_queues import error_code_name, http2_code
from agent.h2.connection import h2_connection, initiate_server
from agent.h2.fastpath import (
    TYPE_WINDOW_UPDATE,
    WINDOW_UPDATE_BYTES,
    FrameReader,
    H2Internals,
    SplitTally,
    window_increment,
)
from agent.h2.frames import CLIENT_PREFACE
from agent.h2.settings import settings_exchange
from agent.h2.trace import FrameTrace
from agent.protocols.in_force import SettingsExchange
from agent.server.connection_trials import ConnectionTrials
from agent.server.guard import ResetRateGuard
from agent.server.handler import Reply
from agent.server.host import ConnectionHost
from agent.server.lifecycle import ENDED, Input, Lifecycle, State, ended_reason
from agent.server.request import Request
from agent.server.sender import ReplySender
from agent.server.streamed import StreamedExchanges
from agent.trial_header import TRIAL_CONTINUES_HEADER, TRIAL_HEADER

log = logging.getLogger("h2iot.server")

_TRIAL_HEADER = TRIAL_HEADER.encode()
_CONTINUES_HEADER = TRIAL_CONTINUES_HEADER.encode()
_FLUSH_BYTES = 256 * 1024
# The receive buffer: a server receives requests and WINDOW_UPDATEs, small frames, so it reads
# in 16 KiB steps and holds one frame of the protocol's MAX_FRAME_SIZE without growing (the
# client's 256 KiB would cost every idle connection that much).
_READ_CAPACITY = 40 * 1024
_READ_MIN_FREE = 16 * 1024
# States in which the host may close the connection to make room, when it serves nothing.
_SHEDDABLE = frozenset({State.HANDSHAKE, State.OPEN})


class ServerConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        host: ConnectionHost,
        connection_id: int,
        fast_path: bool = True,
        traces: TraceWriter | None = None,
    ) -> None:
        """`traces`: with it, every frame is traced and each trial's written as it leaves the
        connection (agent/README.md, Event traces)."""
        self.host = host
        self.trace = None if traces is None else FrameTrace(client_side=False)
        self._traces = traces
        self.id = connection_id
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.lifecycle = Lifecycle()
        self._goaway: ProtocolCode | None = None  # the last GOAWAY's code, either side's
        self.conn = h2_connection(client_side=False, settings=dict(host.h2_settings))
        # The stream limit our SETTINGS announce; h2 holds it from the client's ACK on
        # (initiate_server), and streams over it opened before are refused here.
        self._stream_limit = self.conn.local_settings.max_concurrent_streams
        self.tally_in = SplitTally(expect_preface=True)
        self._reader = FrameReader(
            self.conn.max_inbound_frame_size,
            len(CLIENT_PREFACE),
            capacity=_READ_CAPACITY,
            min_free=_READ_MIN_FREE,
        )
        self._fast_enabled = fast_path and H2Internals.available()
        self.tally_out = SplitTally()
        self.guard = ResetRateGuard()
        self.trials = ConnectionTrials(
            host,
            connection_id,
            self.tally_out,
            self.tally_in,
            self._settings_exchange,
            on_finish=None if traces is None else self._write_trace,
        )
        self.streamed = StreamedExchanges(self)
        self.sender = ReplySender(
            self.conn,
            self.streamed,
            self.trials,
            fast_enabled=self._fast_enabled,
            tally=self.tally_out,
            flush=self._flush,
            trace=self.trace,
        )
        self._last_byte_timer: asyncio.TimerHandle | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Event-loop time of the last progress: connection made, handshake done, a request
        # received, response bytes written.
        self.last_progress_s = 0.0
        self._kicked = False

    # asyncio callbacks -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not an asyncio.Transport subclass, only alike).
        self.transport = cast("asyncio.Transport", transport)
        peername = transport.get_extra_info("peername")
        if peername:
            self.peer = f"{peername[0]}:{peername[1]}"
        tls = transport.get_extra_info("ssl_object")
        if tls is not None and tls.session_reused:
            # A TLS 1.3 session ticket the client offered, taken (agent.server.app.tls_context).
            self.trials.handshake_resumed()
        self.lifecycle.advance(Input.MADE)
        initiate_server(self.conn)
        self._flush()
        loop = self._loop = asyncio.get_running_loop()
        self.last_progress_s = loop.time()
        self._handshake_timer = loop.call_later(
            self.host.limits.handshake_timeout_s, self._handshake_expired
        )
        # Last: over the connection cap, the host may close this very connection.
        self.host.connection_opened(self)

    def _advance(self, event: Input) -> bool:
        """The lifecycle's step; leaving the handshake stops its timer, whichever way, and
        leaving OPEN the idle timer."""
        changed = self.lifecycle.advance(event)
        if changed:
            if self._handshake_timer is not None:
                self._handshake_timer.cancel()
                self._handshake_timer = None
            if self._idle_timer is not None and self.lifecycle.state is not State.OPEN:
                self._idle_timer.cancel()
                self._idle_timer = None
        return changed

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        reader = self._reader
        reader.commit(nbytes)
        if self.lifecycle.state in ENDED:
            # Bytes a TLS transport still hands over after we closed it: nothing reads them.
            return
        if self.trace is not None:
            self.trace.received(reader.view[reader.end - nbytes : reader.end], time.monotonic_ns())
        tally = self.tally_in
        if reader.preface_left:
            preface = reader.take_preface()
            tally.feed(preface)
            if not self._receive_h2(preface):
                tally.feed(reader.take_all())
                return
        conn = self.conn
        sender = self.sender
        fast = self._fast_enabled and H2Internals.is_open(conn)
        while True:
            try:
                frame = reader.next_frame()
            except ProtocolError as exc:
                # Refused on its header (too long, wrong kind of stream): never buffered.
                tally.feed(reader.take_all())
                self._refuse(exc)
                return
            if frame is None:
                break
            frame_type, _flags, stream_id, start, length = frame
            if (
                fast
                and frame_type == TYPE_WINDOW_UPDATE
                and length == 4
                and not reader.header_block
                and sender.window_update(stream_id, window_increment(reader.buffer, start))
            ):
                tally.frames[TYPE_WINDOW_UPDATE] += 1
                tally.frame_bytes[TYPE_WINDOW_UPDATE] += WINDOW_UPDATE_BYTES
                continue
            raw = reader.raw()
            tally.feed(raw)
            if not self._receive_h2(raw):
                tally.feed(reader.take_all())
                return
            fast = self._fast_enabled and H2Internals.is_open(conn)
        sender.pump()
        self._flush()

    def _receive_h2(self, data: bytes) -> bool:
        """Bytes for h2 and the events they cause; False once the connection is finished."""
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            self._refuse(exc)
            return False
        self._reader.max_frame_size = self.conn.max_inbound_frame_size
        for event in events:
            kind = type(event)
            if kind is ev.WindowUpdated:
                continue
            if kind is ev.RemoteSettingsChanged:
                if self.lifecycle.state is State.HANDSHAKE:
                    self._handshake_done()
            elif kind is ev.RequestReceived:
                self._on_request(event)  # type: ignore[arg-type]
            elif kind is ev.StreamReset:
                self._on_reset(event)  # type: ignore[arg-type]
                if self.lifecycle.state is State.FAILED:
                    return False
            elif kind is ev.DataReceived:
                self._on_data(event)  # type: ignore[arg-type]
            elif kind is ev.StreamEnded and self.streamed.by_stream:
                self.streamed.on_body_end(event.stream_id)  # type: ignore[attr-defined]
            elif kind is ev.ConnectionTerminated:
                self._goaway = http2_code(event.error_code)  # type: ignore[attr-defined]
                self._advance(Input.PEER_GOAWAY)
                self._flush()
                self._close_transport()
                return False
        if self.transport is None or self.transport.is_closing():
            return False
        self.sender.drain_h2()
        return True

    def _handshake_done(self) -> None:
        """The peer's preface and first SETTINGS frame are in (RFC 9113 section 3.4)."""
        self._advance(Input.PREFACE)
        assert self._loop is not None
        self.last_progress_s = self._loop.time()
        self._idle_timer = self._loop.call_later(self.host.limits.idle_timeout_s, self._idle_check)

    def pause_writing(self) -> None:
        self.sender.paused = True

    def resume_writing(self) -> None:
        self.sender.paused = False
        self.sender.pump()
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        """Says in one line why the connection ended (ended_reason: the state it ended in, the
        transport's `exc`, the last GOAWAY's code): a debug line, unless the network broke it."""
        state = self.lifecycle.state
        level = logging.DEBUG if exc is None else logging.INFO
        log.log(
            level,
            "peer %s: connection ended: %s",
            self.peer,
            ended_reason(state, exc, self._goaway),
        )
        failed = state is State.FAILED
        self._advance(Input.LOST)
        for timer in (self._last_byte_timer, self._idle_timer):
            if timer is not None:
                timer.cancel()
        self._last_byte_timer = self._idle_timer = None
        self.streamed.close_all("the connection went away")
        self.trials.finish()
        self.host.connection_closed(self, failed)

    # requests ----------------------------------------------------------------------------------

    def _on_request(self, event: ev.RequestReceived) -> None:
        assert self._loop is not None
        self.last_progress_s = self._loop.time()
        stream_id = event.stream_id
        stream = self.conn.streams.get(stream_id)
        if stream is None or stream.closed:
            # Reset (or refused) later in the same read, before we could answer.
            return
        if (
            self.lifecycle.state is State.DRAINING
            or self.conn.open_inbound_streams > self._stream_limit
        ):
            # Draining, or over our limit before the client has read it (RFC 9113 5.1.2: a
            # stream error; REFUSED_STREAM says nothing was done, so it may be retried).
            self.conn.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
            return
        headers = dict(event.headers or ())
        self.trials.request(
            stream_id,
            _decode(headers.get(_TRIAL_HEADER)),
            continues=_CONTINUES_HEADER in headers,
        )
        method = headers.get(b":method", b"")
        path = _decode(headers.get(b":path")) or ""
        request = Request(method, path, headers)
        answer = self.host.handle(request)
        if isinstance(answer, Reply):
            self._respond(stream_id, method, answer)
        else:
            self.streamed.start(request, stream_id, answer)

    def _respond(self, stream_id: int, method: bytes, reply: Reply) -> None:
        body = reply.body
        headers = [
            (b":status", str(reply.status).encode()),
            (b"content-length", str(len(body)).encode()),
            *reply.headers,
        ]
        if method == b"HEAD" or not body:
            self.conn.send_headers(stream_id, headers, end_stream=True)
            self.trials.response_done(stream_id)
            return
        self.conn.send_headers(stream_id, headers)
        self.sender.start(stream_id, body)

    def _on_data(self, event: ev.DataReceived) -> None:
        size = event.flow_controlled_length
        if self.streamed.by_stream and self.streamed.on_data(event.stream_id, event.data, size):
            return
        # A Reply's request body is not used (nor one its exchange's handler left unread):
        # give the credit back so a sender is never stuck.
        if size:
            self.conn.acknowledge_received_data(size, event.stream_id)

    def _on_reset(self, event: ev.StreamReset) -> None:
        self.sender.pending.pop(event.stream_id, None)
        if self.streamed.by_stream:
            self.streamed.on_reset(event.stream_id, error_code_name(event.error_code))
        self.trials.stream_reset(event.stream_id)
        if event.remote_reset and self.guard.reset_received(time.monotonic_ns()):
            self.conn.close_connection(ErrorCodes.ENHANCE_YOUR_CALM)
            limit, window_s = self.guard.limit, self.guard.window_ns / 1e9
            reason = f"stream reset storm (more than {limit} resets in {window_s:.1f} s)"
            self._fail(reason, ErrorCodes.ENHANCE_YOUR_CALM)

    # sending -----------------------------------------------------------------------------------

    def _write_out(self) -> None:
        """Everything queued (ours and h2's, in order) in one write."""
        if self.sender.write(self.transport) and self._loop is not None:
            self.last_progress_s = self._loop.time()

    def _flush(self) -> None:
        self._write_out()
        if self.trials.done and self._last_byte_timer is None:
            self._note_last_bytes()
        draining = self.lifecycle.state is State.DRAINING
        if draining and not (self.sender.pending or self.streamed.by_stream):
            self._close_gracefully()

    def _note_last_bytes(self) -> None:
        self._last_byte_timer = None
        transport = self.transport
        if transport is not None and transport.get_write_buffer_size():
            # The bytes are still in user space; the trial's last byte leaves when they drain.
            loop = asyncio.get_running_loop()
            self._last_byte_timer = loop.call_later(0.001, self._note_last_bytes)
            return
        self.trials.last_bytes_left()

    def progressed(self) -> None:
        """Request body bytes arrived for an exchange: progress for the idle timeout."""
        assert self._loop is not None
        self.last_progress_s = self._loop.time()

    def kick(self) -> None:
        """Send what the exchanges queued, once per event-loop turn (a handler's many calls in
        one turn leave in one write)."""
        if not self._kicked and self._loop is not None:
            self._kicked = True
            self._loop.call_soon(self._kicked_flush)

    def _kicked_flush(self) -> None:
        self._kicked = False
        if self.lifecycle.state in ENDED:
            return
        self.sender.pump()
        self._flush()

    def _settings_exchange(self) -> SettingsExchange:
        """What the connection announced and received: a trial begins with a request, which
        follows the client's preface and its SETTINGS, so the client's are in by then."""
        return settings_exchange(self.conn, peer_settings_seen=True)

    # limits, shutdown and failures --------------------------------------------------------------

    @property
    def sheddable(self) -> bool:
        """The host may close it to make room: still in its handshake, or serving nothing."""
        serving = self.sender.pending or self.streamed.by_stream
        return self.lifecycle.state in _SHEDDABLE and not serving

    def shed(self) -> None:
        """Closed by the host to make room: GOAWAY NO_ERROR naming the last stream handled
        (nothing in flight is lost: the host sheds only sheddable connections)."""
        self.drain()

    def _idle_check(self) -> None:
        self._idle_timer = None
        if self.lifecycle.state is not State.OPEN:
            return
        assert self._loop is not None
        idle_timeout_s = self.host.limits.idle_timeout_s
        due_s = self.last_progress_s + idle_timeout_s
        if self.streamed.paced_by_handler():
            # A subscription publishing slower than the timeout is quiet, not idle.
            due_s = self._loop.time() + idle_timeout_s
        if self._loop.time() < due_s:
            self._idle_timer = self._loop.call_at(due_s, self._idle_check)
            return
        # Even a stream stalled for want of flow-control credit ends here: no progress is no
        # progress, and a peer must not hold a connection by granting no window.
        self._advance(Input.IDLE_TIMEOUT)
        self._goaway = http2_code(ErrorCodes.NO_ERROR)
        self.conn.close_connection(ErrorCodes.NO_ERROR)
        self._write_out()
        self._close_transport()

    def drain(self) -> None:
        """Graceful shutdown: GOAWAY now, finish the streams in flight, then close."""
        if not self._advance(Input.DRAIN):
            return  # already draining or ending
        goaway = GoAwayFrame(0)
        goaway.last_stream_id = self.conn.highest_inbound_stream_id
        goaway.error_code = ErrorCodes.NO_ERROR
        self._goaway = http2_code(ErrorCodes.NO_ERROR)
        frame = goaway.serialize()
        if self.transport is not None and not self.transport.is_closing():
            self.tally_out.feed(frame)
            self._traced(frame)
            self.transport.write(frame)
        self._flush()

    def _traced(self, data: bytes) -> None:
        if self.trace is not None:
            self.trace.sent(data, time.monotonic_ns())

    def _write_trace(self, trial_id: str) -> None:
        assert self.trace is not None and self._traces is not None
        self._traces.write(trial_id, self.trace.take())

    def _close_gracefully(self) -> None:
        self._advance(Input.IDLE)
        if self.transport is None or self.transport.is_closing():
            return
        self.conn.close_connection(ErrorCodes.NO_ERROR)
        data = self.conn.data_to_send()
        self.tally_out.feed(data)
        self._traced(data)
        self.transport.write(data)
        self._close_transport()

    def _refuse(self, exc: ProtocolError) -> None:
        """The peer broke HTTP/2: GOAWAY with the error's code, then close. h2 has queued that
        GOAWAY already when the error was its own, except for a bad preface, which it refuses
        before its state machine runs; errors found before h2 saw the frame are queued here."""
        if self.conn.state_machine.state is not ConnectionState.CLOSED:
            self.conn.close_connection(exc.error_code)
        self._fail(f"{type(exc).__name__}: {exc}", exc.error_code)

    def _fail(self, reason: str, code: int) -> None:
        """The peer failed; `code` is the one our GOAWAY carries (queued by the caller)."""
        self._advance(Input.FAILURE)
        self._goaway = http2_code(code)
        log.warning(
            "peer %s: %s; sent GOAWAY (%s) and closed the connection",
            self.peer,
            reason,
            self._goaway,
        )
        self._write_out()
        self._close_transport()

    def _handshake_expired(self) -> None:
        self._handshake_timer = None
        self.conn.close_connection(ErrorCodes.SETTINGS_TIMEOUT)
        timeout_s = self.host.limits.handshake_timeout_s
        self._fail(f"no preface and SETTINGS within {timeout_s:g} s", ErrorCodes.SETTINGS_TIMEOUT)

    def _close_transport(self) -> None:
        self.sender.pending.clear()
        self.streamed.close_all("the connection was closed")
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def _decode(value: bytes | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", errors="replace")
