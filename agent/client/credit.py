"""The HTTP/2 client's receive-side credit: the connection's window and each response stream's
(agent.h2.flow.ReceiveWindow, whose policy decides when credit goes back), and the WINDOW_UPDATE
frames that gave it. DATA that h2 saw is credited through h2 here; the connection's fast path
(agent.client.connection) writes its own WINDOW_UPDATEs from the same windows and counts them
here too."""

from __future__ import annotations

from h2.connection import H2Connection
from h2.exceptions import StreamClosedError

from agent.h2.flow import FlowControlOptions, ReceiveWindow

# Protocol default for the connection window (RFC 9113 section 6.9.2): the peer's first credit.
INITIAL_CONNECTION_WINDOW = 65535


class ReceiveCredit:
    """One connection's windows; `streams` holds those of the streams still receiving."""

    __slots__ = ("_conn", "_policy", "_stream_window", "connection", "streams", "updates_sent")

    def __init__(self, conn: H2Connection, flow: FlowControlOptions, stream_window: int) -> None:
        self._conn = conn
        self._policy = flow.window_update_policy
        self._stream_window = stream_window
        self.connection = ReceiveWindow(
            flow.connection_window, INITIAL_CONNECTION_WINDOW, self._policy
        )
        self.streams: dict[int, ReceiveWindow] = {}
        self.updates_sent = 0

    def open(self) -> None:
        """The connection's first WINDOW_UPDATE, when its window is to be larger than the
        protocol's."""
        increment = self.connection.opening_increment()
        if increment:
            self._conn.increment_flow_control_window(increment)
            self.updates_sent += 1

    def stream_opened(self, stream_id: int) -> None:
        self.streams[stream_id] = ReceiveWindow(
            self._stream_window, self._stream_window, self._policy
        )

    def forget(self, stream_id: int) -> None:
        self.streams.pop(stream_id, None)

    def credit(self, stream_id: int, size: int, stream_open: bool) -> None:
        """Account `size` received bytes to the connection's and the stream's windows, with
        WINDOW_UPDATEs through h2 as their policy decides."""
        increment = self.connection.consume(size)
        if increment:
            self._conn.increment_flow_control_window(increment)
            self.updates_sent += 1
        window = self.streams.get(stream_id)
        if window is not None and stream_open:
            increment = window.consume(size)
            if increment:
                try:
                    self._conn.increment_flow_control_window(increment, stream_id=stream_id)
                    self.updates_sent += 1
                except StreamClosedError:
                    # END_STREAM arrived later in the same read: no credit is needed any more.
                    pass
