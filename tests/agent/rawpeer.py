"""A raw HTTP/2 peer for tests: writes exactly the frames a test builds and parses every frame
the server sends with hyperframe, with no flow-control help from a library."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from hpack import Encoder
from hyperframe.frame import Frame, GoAwayFrame, HeadersFrame, PingFrame, SettingsFrame

from agent.h2.frames import CLIENT_PREFACE


@dataclass
class RawPeer:
    port: int
    timeout_s: float = 20.0
    sock: socket.socket = field(init=False)
    _buffer: bytearray = field(init=False, default_factory=bytearray)
    _encoder: Encoder = field(init=False, default_factory=Encoder)

    def __post_init__(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout_s)

    def close(self) -> None:
        self.sock.close()

    def send(self, *frames: Frame | bytes) -> None:
        self.sock.sendall(b"".join(f if isinstance(f, bytes) else f.serialize() for f in frames))

    def handshake(self, settings: dict[int, int] | None = None) -> None:
        self.send(CLIENT_PREFACE, SettingsFrame(0, settings=settings or {}))

    def acknowledge_server_settings(self) -> None:
        """ACK the server's SETTINGS and wait until they are in force on its side.

        A PING answered after the ACK proves the server processed the ACK in an earlier read
        (h2 applies a new MAX_FRAME_SIZE to the next read, not to the rest of the same one)."""
        acked = False
        while (frame := self.read_frame()) is not None:
            if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags and not acked:
                self.send(SettingsFrame(0, flags=["ACK"]), PingFrame(0, opaque_data=b"settings"))
                acked = True
            elif isinstance(frame, PingFrame) and "ACK" in frame.flags:
                return
        raise ConnectionError("server closed before its SETTINGS were acknowledged")

    def header_block(
        self, path: str, extra: list[tuple[str, str]] | None = None, method: str = "GET"
    ) -> bytes:
        headers = [
            (":method", method),
            (":scheme", "http"),
            (":authority", "127.0.0.1"),
            (":path", path),
            *(extra or []),
        ]
        return bytes(self._encoder.encode(headers))

    def get(self, stream_id: int, path: str, end_stream: bool = True) -> None:
        flags = {"END_HEADERS"} | ({"END_STREAM"} if end_stream else set())
        self.send(HeadersFrame(stream_id, data=self.header_block(path), flags=flags))

    def read_frame(self) -> Frame | None:
        """The next whole frame, or None when the server closed the connection."""
        while True:
            if len(self._buffer) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(self._buffer[:9]))
                if len(self._buffer) >= 9 + length:
                    frame.parse_body(memoryview(bytes(self._buffer[9 : 9 + length])))
                    del self._buffer[: 9 + length]
                    return frame
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self._buffer += chunk

    def read_until_goaway(self) -> GoAwayFrame | None:
        while (frame := self.read_frame()) is not None:
            if isinstance(frame, GoAwayFrame):
                return frame
        return None
