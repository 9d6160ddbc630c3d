"""One HTTP/2 client connection: asyncio's Protocol around h2's sans-IO H2Connection, with the
receive-side flow control done by `agent.flow.ReceiveWindow` so its policy is explicit."""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field

import h2.events as ev
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.exceptions import ProtocolError, StreamClosedError
from h2.settings import SettingCodes, Settings

from agent.errors import PeerProtocolError
from agent.flow import FlowControlOptions, ReceiveWindow
from agent.frames import FrameTally

# Protocol default for the connection window (RFC 9113 section 6.9.2): the peer's first credit.
INITIAL_CONNECTION_WINDOW = 65535


@dataclass
class Response:
    """One request's response as it arrives; timestamps are monotonic ns."""

    path: str
    t_request_ns: int
    t_headers_ns: int = 0
    t_end_ns: int = 0
    status: int = 0
    headers: dict[bytes, bytes] = field(default_factory=dict)
    size_bytes: int = 0
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    body: bytearray | None = None


class ClientConnection(asyncio.Protocol):
    def __init__(self, settings: dict[SettingCodes, int], flow: FlowControlOptions) -> None:
        self.flow = flow
        self.local_settings = {
            SettingCodes.ENABLE_PUSH: 0,
            SettingCodes.MAX_CONCURRENT_STREAMS: 100,
            SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
            **settings,
            SettingCodes.INITIAL_WINDOW_SIZE: flow.initial_window_size,
        }
        self.conn = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.conn.local_settings = Settings(client=True, initial_values=self.local_settings)
        self.tally_in = FrameTally()
        self.tally_out = FrameTally(expect_preface=True)
        self.transport: asyncio.Transport | None = None
        self.connection_window = ReceiveWindow(
            flow.connection_window, INITIAL_CONNECTION_WINDOW, flow.window_update_policy
        )
        self._stream_windows: dict[int, ReceiveWindow] = {}
        self._responses: dict[int, tuple[Response, asyncio.Future[Response]]] = {}
        self._settings_received = asyncio.get_running_loop().create_future()
        self._closed = asyncio.get_running_loop().create_future()
        self.window_updates_sent = 0

    # asyncio callbacks -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn.initiate_connection()
        increment = self.connection_window.opening_increment()
        if increment:
            self.conn.increment_flow_control_window(increment)
            self.window_updates_sent += 1
        self._flush()

    def data_received(self, data: bytes) -> None:
        self.tally_in.feed(data)
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            self._fail_all(PeerProtocolError(f"server broke HTTP/2: {type(exc).__name__}: {exc}"))
            self._flush()
            if self.transport is not None:
                self.transport.close()
            return
        now = time.monotonic_ns()
        for event in events:
            kind = type(event)
            if kind is ev.DataReceived:
                self._on_data(event, now)  # type: ignore[arg-type]
            elif kind is ev.ResponseReceived:
                self._on_response(event, now)  # type: ignore[arg-type]
            elif kind is ev.StreamEnded:
                self._on_end(event.stream_id, now)  # type: ignore[attr-defined]
            elif kind is ev.RemoteSettingsChanged:
                if not self._settings_received.done():
                    self._settings_received.set_result(None)
            elif kind is ev.StreamReset:
                self._on_reset(event)  # type: ignore[arg-type]
            elif kind is ev.ConnectionTerminated:
                code = event.error_code  # type: ignore[attr-defined]
                self._fail_all(PeerProtocolError(f"server sent GOAWAY ({code!s})"))
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail_all(PeerProtocolError("server closed the connection"))
        if not self._closed.done():
            self._closed.set_result(None)

    # events ------------------------------------------------------------------------------------

    def _on_response(self, event: ev.ResponseReceived, now: int) -> None:
        entry = self._responses.get(event.stream_id)
        if entry is None:
            return
        response = entry[0]
        response.t_headers_ns = now
        response.headers = dict(event.headers or ())
        try:
            response.status = int(response.headers.get(b":status", b"0"))
        except ValueError:
            response.status = 0

    def _on_data(self, event: ev.DataReceived, now: int) -> None:
        stream_id = event.stream_id
        size = event.flow_controlled_length
        increment = self.connection_window.consume(size)
        if increment:
            self.conn.increment_flow_control_window(increment)
            self.window_updates_sent += 1
        window = self._stream_windows.get(stream_id)
        if window is not None and event.stream_ended is None:
            increment = window.consume(size)
            if increment:
                try:
                    self.conn.increment_flow_control_window(increment, stream_id=stream_id)
                    self.window_updates_sent += 1
                except StreamClosedError:
                    # END_STREAM arrived later in the same read: no credit is needed any more.
                    pass
        entry = self._responses.get(stream_id)
        if entry is not None:
            response = entry[0]
            data = event.data
            response.size_bytes += len(data)
            response.digest.update(data)
            if response.body is not None:
                response.body += data

    def _on_end(self, stream_id: int, now: int) -> None:
        self._stream_windows.pop(stream_id, None)
        entry = self._responses.pop(stream_id, None)
        if entry is None:
            return
        response, future = entry
        response.t_end_ns = now
        if not future.done():
            future.set_result(response)

    def _on_reset(self, event: ev.StreamReset) -> None:
        self._stream_windows.pop(event.stream_id, None)
        entry = self._responses.pop(event.stream_id, None)
        if entry is not None and not entry[1].done():
            code = event.error_code
            entry[1].set_exception(
                PeerProtocolError(f"server reset the stream for {entry[0].path} ({code!s})")
            )

    def _fail_all(self, error: Exception) -> None:
        for _response, future in self._responses.values():
            if not future.done():
                future.set_exception(error)
        self._responses.clear()
        if not self._settings_received.done():
            self._settings_received.set_exception(error)
            self._settings_received.exception()  # mark retrieved: nobody may be waiting

    # requests ----------------------------------------------------------------------------------

    def request(
        self,
        authority: str,
        scheme: str,
        path: str,
        extra_headers: list[tuple[bytes, bytes]],
        keep_body: bool = False,
    ) -> asyncio.Future[Response]:
        if self.transport is None or self.transport.is_closing():
            raise PeerProtocolError("connection is closed")
        stream_id = self.conn.get_next_available_stream_id()
        headers = [
            (b":method", b"GET"),
            (b":scheme", scheme.encode()),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"h2iot-agent"),
            *extra_headers,
        ]
        response = Response(path, time.monotonic_ns())
        if keep_body:
            response.body = bytearray()
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._responses[stream_id] = (response, future)
        self._stream_windows[stream_id] = ReceiveWindow(
            self.flow.initial_window_size,
            self.flow.initial_window_size,
            self.flow.window_update_policy,
        )
        self.conn.send_headers(stream_id, headers, end_stream=True)
        self._flush()
        return future

    async def settings_received(self) -> None:
        await self._settings_received

    @property
    def peer_max_concurrent_streams(self) -> int:
        return int(self.conn.remote_settings.max_concurrent_streams)

    def peer_settings(self) -> dict[str, int]:
        remote = self.conn.remote_settings
        return {code.name.lower(): int(remote[code]) for code in SettingCodes if code in remote}

    async def close(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.conn.close_connection()
        self._flush()
        self.transport.close()
        await self._closed

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.tally_out.feed(data)
            self.transport.write(data)
