"""Count HTTP/2 frames and bytes by type in a byte stream, without parsing payloads.

A sans-IO tally fed with the exact bytes a connection sent or received. It walks the 9-byte frame
headers only (RFC 9113 section 4.1), keeping partial headers and payload remainders across chunks,
so its cost does not grow with payload size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.traffic import FrameCounts

CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_HEADER_BYTES = 9

FRAME_TYPE_NAMES: dict[int, str] = {
    0x0: "DATA",
    0x1: "HEADERS",
    0x2: "PRIORITY",
    0x3: "RST_STREAM",
    0x4: "SETTINGS",
    0x5: "PUSH_PROMISE",
    0x6: "PING",
    0x7: "GOAWAY",
    0x8: "WINDOW_UPDATE",
    0x9: "CONTINUATION",
}


def frame_type_name(frame_type: int) -> str:
    return FRAME_TYPE_NAMES.get(frame_type, f"UNKNOWN_0x{frame_type:02x}")


@dataclass
class FrameTally:
    """Feed every byte of one direction; read `counts()` at any time."""

    expect_preface: bool = False
    _preface_left: int = field(init=False)
    _header: bytearray = field(init=False, default_factory=bytearray)
    _payload_left: int = field(init=False, default=0)
    _frames: list[int] = field(init=False, default_factory=lambda: [0] * 256)
    _frame_bytes: list[int] = field(init=False, default_factory=lambda: [0] * 256)
    _bytes_total: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._preface_left = len(CLIENT_PREFACE) if self.expect_preface else 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        size = len(data)
        self._bytes_total += size
        pos = 0
        if self._preface_left:
            taken = min(self._preface_left, size)
            self._preface_left -= taken
            pos = taken
        if self._payload_left:
            skipped = min(self._payload_left, size - pos)
            self._payload_left -= skipped
            pos += skipped
        header = self._header
        frames = self._frames
        frame_bytes = self._frame_bytes
        while pos < size:
            if header:
                need = FRAME_HEADER_BYTES - len(header)
                header += data[pos : pos + need]
                pos += min(need, size - pos)
                if len(header) < FRAME_HEADER_BYTES:
                    return
                length = int.from_bytes(header[0:3], "big")
                frame_type = header[3]
                header.clear()
            elif size - pos >= FRAME_HEADER_BYTES:
                length = int.from_bytes(data[pos : pos + 3], "big")
                frame_type = data[pos + 3]
                pos += FRAME_HEADER_BYTES
            else:
                header += data[pos:size]
                return
            frames[frame_type] += 1
            frame_bytes[frame_type] += FRAME_HEADER_BYTES + length
            available = size - pos
            if length > available:
                self._payload_left = length - available
                return
            pos += length

    def counts(self) -> FrameCounts:
        return FrameCounts(
            frames={frame_type_name(t): n for t, n in enumerate(self._frames) if n},
            frame_bytes={frame_type_name(t): n for t, n in enumerate(self._frame_bytes) if n},
            bytes_total=self._bytes_total,
        )
