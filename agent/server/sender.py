"""What an HTTP/2 server connection sends (agent.server.connection holds one): `Reply` bodies in
fair rounds, one DATA frame per stream per round with credit (as nghttp2), the streamed
exchanges' frames in the same rounds, and everything queued, ours and h2's in order, in one
write.

The fast path builds a body's DATA frames here, all but its last, and takes their size off h2's
own window counters, so h2's flow-control view stays exact while its per-frame machinery is
skipped; a body's last frame goes through h2 so that it closes the stream. WINDOW_UPDATEs for
the connection and for the streams being sent are applied here too, straight to those counters
(`window_update`), where h2 would find nothing wrong with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from h2.connection import H2Connection

from agent.h2.fastpath import (
    FRAME_HEADER_BYTES,
    TYPE_DATA,
    H2Internals,
    Outgoing,
    SplitTally,
    data_frame_header,
)
from agent.h2.flow import MAX_WINDOW
from agent.h2.trace import FrameTrace
from agent.server.connection_trials import ConnectionTrials
from agent.server.streamed import StreamedExchanges

# Queued bytes after which a round's burst is handed to the transport, so its back-pressure
# (pause_writing) works.
_FLUSH_BYTES = 256 * 1024


@dataclass(eq=False)
class _OutStream:
    body: memoryview
    offset: int
    h2_stream: Any  # h2's stream, whose window the fast path keeps; None with the fast path off


class ReplySender:
    """One connection's output, counted into `tally`. `flush` writes what is queued (the
    connection's, which also notes the trial's last bytes and ends a drained connection);
    `paused` is the transport's write back-pressure, set by the connection."""

    def __init__(
        self,
        conn: H2Connection,
        streamed: StreamedExchanges,
        trials: ConnectionTrials,
        *,
        fast_enabled: bool,
        tally: SplitTally,
        flush: Callable[[], None],
        trace: FrameTrace | None = None,
    ) -> None:
        self.conn = conn
        self._fast_enabled = fast_enabled
        self._streamed = streamed
        self._trials = trials
        self._flush = flush
        self.pending: dict[int, _OutStream] = {}
        self._tally = tally
        self.paused = False
        self._out = Outgoing(TYPE_DATA, trace)
        # Response frames queued since the last write (one clock read per write, not per frame).
        self._sent_response = False

    def start(self, stream_id: int, body: memoryview) -> None:
        """A Reply's body, its HEADERS queued already, to be sent as credit allows."""
        h2_stream = self.conn.streams[stream_id] if self._fast_enabled else None
        self.pending[stream_id] = _OutStream(body, 0, h2_stream)

    def window_update(self, stream_id: int, increment: int) -> bool:
        """Apply a WINDOW_UPDATE to h2's counters; False leaves it to h2 (an increment of zero
        or with the reserved bit set, an overflow, a stream not being sent: errors or no-ops
        h2 judges)."""
        if not 0 < increment <= MAX_WINDOW:
            return False
        if stream_id == 0:
            window = self.conn.outbound_flow_control_window + increment
            if window > MAX_WINDOW:
                return False
            self.conn.outbound_flow_control_window = window
            return True
        out = self.pending.get(stream_id)
        if out is None:
            return False
        window = out.h2_stream.outbound_flow_control_window + increment
        if window > MAX_WINDOW:
            return False
        out.h2_stream.outbound_flow_control_window = window
        return True

    def pump(self) -> None:
        """Send DATA while any stream has credit: one frame per stream per round."""
        sending = self._streamed.sending
        if self.paused or not (self.pending or sending):
            return
        conn = self.conn
        pending = self.pending
        # Our frames go after whatever h2 has queued (a stream's HEADERS before its DATA).
        self.drain_h2()
        fast = self._fast_enabled and H2Internals.is_open(conn)
        queued = 0
        while (pending or sending) and not self.paused:
            if conn.outbound_flow_control_window <= 0:
                return  # no stream can send until the connection window opens
            max_frame = conn.max_outbound_frame_size
            progressed = False
            for stream_id, stream in list(pending.items()):
                if fast:
                    credit = stream.h2_stream.outbound_flow_control_window
                    if credit <= 0:
                        continue  # most streams wait for their own window: skip them cheaply
                    credit = min(credit, conn.outbound_flow_control_window)
                else:
                    credit = conn.local_flow_control_window(stream_id)
                if credit <= 0:
                    continue
                size = min(credit, max_frame, len(stream.body) - stream.offset)
                self._send_frame(stream_id, stream, size, fast)
                queued += size
                progressed = True
                if conn.outbound_flow_control_window <= 0:
                    break
            if sending and (round_sent := self._streamed.send_round(max_frame)) is not None:
                sent, data_sent = round_sent
                self._sent_response |= data_sent
                queued += sent
                progressed = True
            if not progressed:
                return
            if queued >= _FLUSH_BYTES:
                self._flush()
                queued = 0

    def _send_frame(self, stream_id: int, stream: _OutStream, size: int, fast: bool) -> None:
        self._sent_response = True
        offset = stream.offset
        end = offset + size
        last = end == len(stream.body)
        if fast and not last:
            self._out.add_own(data_frame_header(stream_id, size, False), FRAME_HEADER_BYTES + size)
            self._out.chunks.append(stream.body[offset:end])
            self.conn.outbound_flow_control_window -= size
            stream.h2_stream.outbound_flow_control_window -= size
        else:
            # h2 sends a body's last frame itself: it closes the stream.
            self.conn.send_data(stream_id, stream.body[offset:end], end_stream=last)
            self.drain_h2()
        stream.offset = end
        if last:
            del self.pending[stream_id]
            self._trials.response_done(stream_id)

    def drain_h2(self) -> None:
        """h2's output so far, queued after ours."""
        self._out.add_h2(self.conn.data_to_send())

    def write(self, transport: Any) -> bool:
        """Everything queued (ours and h2's, in order) in one write; whether response frames
        were among it (progress, for the idle timeout)."""
        self.drain_h2()
        sent_response, self._sent_response = self._sent_response, False
        self._out.write(transport, self._tally)
        return sent_response
