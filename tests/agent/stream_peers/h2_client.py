"""A bare HTTP/2 client on the h2 library (not our agent's client), blocking, for the tests that
need a client our code did not write (an RFC 8441 WebSocket to our server: no other client for
it is installable here) or one that misbehaves on purpose (stops reading, sends garbage,
vanishes mid-item)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.settings


@dataclass
class StreamState:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    data: bytearray = field(default_factory=bytearray)
    unacknowledged: list[tuple[int, int]] = field(default_factory=list)  # (size, flow bytes)
    trailers: dict[bytes, bytes] = field(default_factory=dict)
    ended: bool = False
    reset_code: int | None = None


class H2Client:
    def __init__(self, port: int, initial_window_size: int = 65535, timeout_s: float = 20.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.conn.local_settings = h2.settings.Settings(
            client=True,
            initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: initial_window_size},
        )
        self.conn.initiate_connection()
        self.streams: dict[int, StreamState] = {}
        self.settings_received = False
        self.goaway_code: int | None = None
        self.acknowledging = True  # hand credit back as data arrives (False: a stalled reader)
        self.timeout_s = timeout_s
        self._flush()
        self.pump(lambda: self.settings_received)

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def open(
        self,
        method: str,
        path: str,
        extra: list[tuple[str, str]] | None = None,
        end_stream: bool = True,
    ) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        headers = [
            (":method", method),
            (":scheme", "http"),
            (":authority", "127.0.0.1"),
            (":path", path),
        ]
        self.conn.send_headers(stream_id, headers + (extra or []), end_stream=end_stream)
        self.streams[stream_id] = StreamState()
        self._flush()
        return stream_id

    def send_data(self, stream_id: int, data: bytes, end_stream: bool = False) -> None:
        self.conn.send_data(stream_id, data, end_stream=end_stream)
        self._flush()

    def acknowledge(self, stream_id: int) -> None:
        """Credit back everything received on the stream so far."""
        state = self.streams[stream_id]
        for _size, flow in state.unacknowledged:
            self.conn.acknowledge_received_data(flow, stream_id)
        state.unacknowledged.clear()
        self._flush()

    def pump(self, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.timeout_s  # a hang guard, not a timing assertion
        while not done():
            assert time.monotonic() < deadline, "the server did not get there in time"
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            for event in self.conn.receive_data(chunk):
                self._event(event)
            self._flush()

    def _event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RemoteSettingsChanged):
            self.settings_received = True
        elif isinstance(event, h2.events.ResponseReceived):
            self.streams[event.stream_id].headers = dict(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            state = self.streams[event.stream_id]
            state.data += event.data
            state.unacknowledged.append((len(event.data), event.flow_controlled_length))
            if self.acknowledging:
                self.acknowledge(event.stream_id)
        elif isinstance(event, h2.events.TrailersReceived):
            self.streams[event.stream_id].trailers = dict(event.headers)
        elif isinstance(event, h2.events.StreamEnded):
            self.streams[event.stream_id].ended = True
        elif isinstance(event, h2.events.StreamReset):
            self.streams[event.stream_id].reset_code = event.error_code
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway_code = event.error_code

    def close(self) -> None:
        self.sock.close()
