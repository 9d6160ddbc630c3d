"""Every HTTP/2 frame one connection sent and received, with its time: a sans-IO walker fed the
exact bytes of each direction, as `FrameTally` is, that keeps each frame's header (type, flags,
stream id, payload length) instead of a count.

It is fed where the connection reads from and writes to its transport, before the fast path
(agent.h2.fastpath) takes frames aside, so it sees every frame whichever path handles it. The
caller passes the time (a monotonic clock's nanoseconds): a chunk's frames all take the time the
chunk was fed. Off (no `FrameTrace`), a connection pays one `is None` test per read and write.

Its events become qlog under our own namespace (`NAMESPACE`, agent/README.md "Event traces").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from agent.h2.frames import CLIENT_PREFACE, FRAME_HEADER_BYTES, frame_type_name

NAMESPACE = "h2iot_http2"
"""The qlog category of our HTTP/2 frame events: `h2iot_http2:frame_sent`, `:frame_received`."""

SENT = "sent"
RECEIVED = "received"


@dataclass(frozen=True)
class FrameEvent:
    """One frame's header, as it crossed the wire, and when."""

    time_ns: int
    direction: str  # SENT or RECEIVED
    frame_type: int
    flags: int
    stream_id: int
    length_bytes: int  # the payload's, without the 9-byte header

    def qlog(self, start_ns: int) -> dict[str, object]:
        """Its qlog event, `time` in milliseconds after `start_ns` (the trace's reference)."""
        return {
            "time": (self.time_ns - start_ns) / 1e6,
            "name": f"{NAMESPACE}:frame_{self.direction}",
            "data": {
                "frame_type": frame_type_name(self.frame_type).lower(),
                "stream_id": self.stream_id,
                "length": self.length_bytes,
                "flags": self.flags,
            },
        }


@dataclass
class _Walker:
    """One direction: finds the frame headers in a byte stream fed in arbitrary chunks."""

    direction: str
    events: list[FrameEvent]
    _preface_left: int = 0
    _header: bytearray = field(default_factory=bytearray)
    _payload_left: int = 0

    def feed(self, data: bytes | bytearray | memoryview, now_ns: int) -> None:
        size = len(data)
        pos = min(self._preface_left, size)
        self._preface_left -= pos
        skipped = min(self._payload_left, size - pos)
        self._payload_left -= skipped
        pos += skipped
        header = self._header
        while pos < size:
            need = FRAME_HEADER_BYTES - len(header)
            header += data[pos : pos + need]
            pos += min(need, size - pos)
            if len(header) < FRAME_HEADER_BYTES:
                return
            length = int.from_bytes(header[0:3], "big")
            stream_id = int.from_bytes(header[5:9], "big") & 0x7FFF_FFFF
            self.events.append(
                FrameEvent(now_ns, self.direction, header[3], header[4], stream_id, length)
            )
            header.clear()
            taken = min(length, size - pos)
            self._payload_left = length - taken
            pos += taken


class FrameTrace:
    """Both directions of one connection, their events in the order they were fed."""

    def __init__(self, client_side: bool) -> None:
        self.events: list[FrameEvent] = []
        preface = len(CLIENT_PREFACE)
        self._sent = _Walker(SENT, self.events, _preface_left=preface if client_side else 0)
        self._received = _Walker(RECEIVED, self.events, _preface_left=0 if client_side else preface)

    def sent(self, data: bytes | bytearray | memoryview, now_ns: int) -> None:
        self._sent.feed(data, now_ns)

    def received(self, data: bytes | bytearray | memoryview, now_ns: int) -> None:
        self._received.feed(data, now_ns)

    def qlog_events(self, start_ns: int) -> Iterator[dict[str, object]]:
        return (event.qlog(start_ns) for event in self.events)

    def take(self) -> list[FrameEvent]:
        """The events so far, which the trace then forgets (a server's connection hands each
        trial its own)."""
        taken = self.events[:]
        self.events.clear()
        return taken
