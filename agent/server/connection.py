"""One HTTP/2 server connection: asyncio's Protocol around h2's sans-IO H2Connection.

The hot path (a WINDOW_UPDATE arrives, DATA goes out) is kept short: events are dispatched by
type, every stream with credit gets one frame per round (fair, like nghttp2), and all frames
produced by one read are written with a single transport.write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import h2.events as ev
from h2.connection import ConnectionState
from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError
from hyperframe.frame import GoAwayFrame

from agent import probe
from agent.frames import FrameCounts, FrameTally
from agent.h2setup import h2_connection
from agent.server.guard import ResetRateGuard
from agent.server.ledger import TRIAL_HEADER

if TYPE_CHECKING:
    from agent.server.app import ServerApp

log = logging.getLogger("h2iot.server")

_ALLOWED_METHODS = (b"GET", b"HEAD")
_TRIAL_HEADER = TRIAL_HEADER.encode()
# How long a connection may take to send its preface and first SETTINGS.
HANDSHAKE_TIMEOUT_S = 10.0
_FLUSH_BYTES = 256 * 1024


@dataclass
class _OutStream:
    body: memoryview
    offset: int
    trial_id: str | None


class ServerConnection(asyncio.Protocol):
    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.id = app.next_connection_id()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.conn = h2_connection(client_side=False, settings=app.h2_settings)
        self.tally_in = FrameTally(expect_preface=True)
        self.tally_out = FrameTally()
        self.guard = ResetRateGuard()
        self.pending: dict[int, _OutStream] = {}
        self.stream_trials: dict[int, str] = {}
        self.trial_id: str | None = None
        self._trial_marks = (self.tally_out.counts(), self.tally_in.counts())
        self._done_trials: list[str] = []
        self._paused = False
        self._last_byte_poll = False
        self._draining = False
        self._failed = False
        self._closed = False
        self._handshake_timer: asyncio.TimerHandle | None = None

    # asyncio callbacks -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peername = transport.get_extra_info("peername")
        if peername:
            self.peer = f"{peername[0]}:{peername[1]}"
        self.app.connection_opened(self)
        self.conn.initiate_connection()
        self._flush()
        loop = asyncio.get_running_loop()
        self._handshake_timer = loop.call_later(HANDSHAKE_TIMEOUT_S, self._handshake_expired)

    def data_received(self, data: bytes) -> None:
        self.tally_in.feed(data)
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            # h2 queues the GOAWAY with the error code RFC 9113 prescribes, except for a bad
            # preface, which it refuses before its state machine runs.
            if self.conn.state_machine.state is not ConnectionState.CLOSED:
                self.conn.close_connection(exc.error_code)
            self._fail(f"{type(exc).__name__}: {exc}")
            return
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        for event in events:
            kind = type(event)
            if kind is ev.WindowUpdated or kind is ev.RemoteSettingsChanged:
                continue
            if kind is ev.RequestReceived:
                self._on_request(event)  # type: ignore[arg-type]
            elif kind is ev.StreamReset:
                self._on_reset(event)  # type: ignore[arg-type]
                if self._failed:
                    return
            elif kind is ev.DataReceived:
                self._on_data(event)  # type: ignore[arg-type]
            elif kind is ev.ConnectionTerminated:
                self._flush()
                self._close_transport()
                return
        self._pump()
        self._flush()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._pump()
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        self._finish_trial()
        self.app.connection_closed(self)

    # requests ----------------------------------------------------------------------------------

    def _on_request(self, event: ev.RequestReceived) -> None:
        stream_id = event.stream_id
        stream = self.conn.streams.get(stream_id)
        if stream is None or stream.closed:
            # Reset (or refused) later in the same read, before we could answer.
            return
        if self._draining:
            self.conn.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
            return
        headers = dict(event.headers or ())
        trial_id = _decode(headers.get(_TRIAL_HEADER))
        if trial_id is not None:
            self._enter_trial(trial_id)
            self.stream_trials[stream_id] = trial_id
        method = headers.get(b":method", b"")
        path = _decode(headers.get(b":path")) or ""
        if method not in _ALLOWED_METHODS:
            self._respond_empty(stream_id, 405, extra=[(b"allow", b"GET, HEAD")])
            return
        resource = self.app.content.lookup(path)
        if resource is None:
            self._respond_empty(stream_id, 404)
            return
        body = resource.body
        response_headers = [
            (b":status", b"200"),
            (b"content-length", str(len(body)).encode()),
            (b"content-type", resource.content_type.encode()),
            (b"server", self.app.server_header),
        ]
        if method == b"HEAD" or not body:
            self.conn.send_headers(stream_id, response_headers, end_stream=True)
            self._response_done(stream_id)
            return
        self.conn.send_headers(stream_id, response_headers)
        self.pending[stream_id] = _OutStream(body, 0, trial_id)

    def _respond_empty(
        self, stream_id: int, status: int, extra: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        headers = [(b":status", str(status).encode()), (b"content-length", b"0")]
        self.conn.send_headers(stream_id, headers + (extra or []), end_stream=True)
        self._response_done(stream_id)

    def _on_data(self, event: ev.DataReceived) -> None:
        # Request bodies are not used; give the credit back so a sender is never stuck.
        if event.flow_controlled_length:
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)

    def _on_reset(self, event: ev.StreamReset) -> None:
        self.pending.pop(event.stream_id, None)
        trial_id = self.stream_trials.pop(event.stream_id, None)
        if trial_id is not None:
            self.app.ledger.stream_reset(trial_id)
        if event.remote_reset and self.guard.reset_received(time.monotonic_ns()):
            self.conn.close_connection(ErrorCodes.ENHANCE_YOUR_CALM)
            limit, window_s = self.guard.limit, self.guard.window_ns / 1e9
            self._fail(f"stream reset storm (more than {limit} resets in {window_s:.1f} s)")

    # sending -----------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Send DATA while any stream has credit: one frame per stream per round."""
        if self._paused or not self.pending:
            return
        conn = self.conn
        pending = self.pending
        window_of = conn.local_flow_control_window
        send_data = conn.send_data
        queued = 0
        while pending and not self._paused:
            max_frame = conn.max_outbound_frame_size
            progressed = False
            for stream_id, out in list(pending.items()):
                credit = window_of(stream_id)
                if credit <= 0:
                    continue
                offset = out.offset
                size = min(credit, max_frame, len(out.body) - offset)
                end = offset + size
                last = end == len(out.body)
                send_data(stream_id, out.body[offset:end], end_stream=last)
                out.offset = end
                queued += size
                progressed = True
                if last:
                    del pending[stream_id]
                    self._response_done(stream_id)
            if not progressed:
                return
            if queued >= _FLUSH_BYTES:
                # Hand large bursts to the transport so its back-pressure (pause_writing) works.
                self._flush()
                queued = 0

    def _response_done(self, stream_id: int) -> None:
        trial_id = self.stream_trials.pop(stream_id, None)
        if trial_id is not None:
            self._done_trials.append(trial_id)

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.tally_out.feed(data)
            self.transport.write(data)
        if self._done_trials and not self._last_byte_poll:
            self._note_last_bytes()
        if self._draining and not self.pending:
            self._close_gracefully()

    def _note_last_bytes(self) -> None:
        self._last_byte_poll = False
        transport = self.transport
        if transport is not None and transport.get_write_buffer_size() and not self._closed:
            # The bytes are still in user space; the trial's last byte leaves when they drain.
            self._last_byte_poll = True
            asyncio.get_running_loop().call_later(0.001, self._note_last_bytes)
            return
        self._note_last_bytes_now()

    # trials ------------------------------------------------------------------------------------

    def _enter_trial(self, trial_id: str) -> None:
        if self.trial_id == trial_id:
            self.app.trial_request(trial_id, self.id)
            return
        if self.trial_id is not None:
            self._finish_trial()
        else:
            # Frames from the connection's start (preface, SETTINGS) belong to its first trial.
            self._trial_marks = (FrameCounts.empty(), FrameCounts.empty())
        self.trial_id = trial_id
        self.app.trial_request(trial_id, self.id)

    def _finish_trial(self) -> None:
        if self.trial_id is None:
            return
        if self._done_trials:
            self._note_last_bytes_now()
        sent = self.tally_out.counts()
        received = self.tally_in.counts()
        self.app.trial_detach(
            self.trial_id,
            self.id,
            sent.minus(self._trial_marks[0]),
            received.minus(self._trial_marks[1]),
        )
        self._trial_marks = (sent, received)
        self.trial_id = None

    def _note_last_bytes_now(self) -> None:
        now = probe.sample()
        for trial_id in self._done_trials:
            self.app.ledger.response_done(trial_id, now)
        self._done_trials.clear()

    # shutdown and failures ---------------------------------------------------------------------

    def drain(self) -> None:
        """Graceful shutdown: GOAWAY now, finish the streams in flight, then close."""
        if self._closed or self._draining:
            return
        self._draining = True
        goaway = GoAwayFrame(0)
        goaway.last_stream_id = self.conn.highest_inbound_stream_id
        goaway.error_code = ErrorCodes.NO_ERROR
        frame = goaway.serialize()
        if self.transport is not None and not self.transport.is_closing():
            self.tally_out.feed(frame)
            self.transport.write(frame)
        self._flush()

    def _close_gracefully(self) -> None:
        if self._closed or self.transport is None or self.transport.is_closing():
            return
        self.conn.close_connection(ErrorCodes.NO_ERROR)
        data = self.conn.data_to_send()
        self.tally_out.feed(data)
        self.transport.write(data)
        self._close_transport()

    def _fail(self, reason: str) -> None:
        if self._failed:
            return
        self._failed = True
        log.warning("peer %s: %s; sent GOAWAY and closed the connection", self.peer, reason)
        self.app.hostile_connections += 1
        self._flush_raw()
        self._close_transport()

    def _flush_raw(self) -> None:
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.tally_out.feed(data)
            self.transport.write(data)

    def _handshake_expired(self) -> None:
        self._handshake_timer = None
        self.conn.close_connection(ErrorCodes.SETTINGS_TIMEOUT)
        self._fail(f"no preface within {HANDSHAKE_TIMEOUT_S:.0f} s")

    def _close_transport(self) -> None:
        self.pending.clear()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def _decode(value: bytes | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", errors="replace")
