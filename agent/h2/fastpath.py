"""The hot path of our HTTP/2 endpoints, sans-IO: a receive buffer that splits the byte stream
into frames, and the few frames the endpoints write themselves.

h2 handles every frame correctly but spends tens of microseconds on each (frame objects, two
state machines, window managers, events). At small windows a page is tens of thousands of DATA
frames (client) and WINDOW_UPDATE frames (server), so the endpoints handle those two kinds
themselves while the connection is in its steady state, and hand h2 every other frame, and any
frame they are not sure about, unchanged and in order. `FrameReader` is the buffer an
`asyncio.BufferedProtocol` reads into (no per-read allocation); it yields whole frames.

A reader in front of h2 inherits every check h2's own reader (h2's FrameBuffer with hyperframe)
makes, and must make them no later than h2 would. On the 9-byte header h2 checks the stream
association of the frame's type (DATA needs a stream, PING must have none): so does
`FrameReader`, raising h2's own ProtocolError. The length h2 compares with MAX_FRAME_SIZE only
once the whole payload is in (h2 4.4 buffers a 16 MiB frame before refusing it); `FrameReader`
refuses it on the header (RFC 9113 section 4.2: FRAME_SIZE_ERROR), with h2's FrameTooLargeError,
so nothing longer than one legal frame is ever buffered. Every check h2 makes on a payload stays
h2's: the frames go to it whole. What the endpoints keep consistent with h2 when they handle a
frame themselves is stated where they do (the client's and server's connection modules);
`H2Internals` names the few attributes of h2's objects involved and checks once that the
installed h2 has them, else the fast path stays off.
"""

from __future__ import annotations

import struct
import time
from typing import Any, Final

from h2.config import H2Configuration
from h2.connection import ConnectionState, H2Connection
from h2.exceptions import FrameTooLargeError, ProtocolError
from hyperframe.exceptions import InvalidDataError
from hyperframe.frame import FRAMES, Frame

from agent.h2.flow import MAX_WINDOW
from agent.h2.frames import FrameTally, frame_type_name
from agent.h2.trace import FrameTrace
from agent.traffic import FrameCounts

FRAME_HEADER_BYTES: Final = 9
WINDOW_UPDATE_BYTES: Final = FRAME_HEADER_BYTES + 4
TYPE_DATA: Final = 0x0
TYPE_HEADERS: Final = 0x1
TYPE_PUSH_PROMISE: Final = 0x5
TYPE_WINDOW_UPDATE: Final = 0x8
TYPE_CONTINUATION: Final = 0x9
FLAG_END_STREAM: Final = 0x1
FLAG_END_HEADERS: Final = 0x4
FLAG_PADDED: Final = 0x8
STREAM_ID_MASK: Final = 0x7FFFFFFF

# 24-bit length as 16 + 8 bits, type, flags, 31-bit stream id (RFC 9113 section 4.1).
_HEADER = struct.Struct(">HBBBL")
_WINDOW_UPDATE = struct.Struct(">HBBBLL")
_WINDOW_UPDATE_PAIR = struct.Struct(">HBBBLLHBBBLL")
_INCREMENT = struct.Struct(">L")

# By frame type, as hyperframe judges a header: True, the type needs a stream (stream 0 is
# refused); False, it must be on stream 0; None, either (unknown types too).
_ASSOCIATIONS: Final[dict[str | None, bool]] = {"has-stream": True, "no-stream": False}
_NEEDS_STREAM: Final[tuple[bool | None, ...]] = tuple(
    _ASSOCIATIONS.get(FRAMES[kind].stream_association) if kind in FRAMES else None
    for kind in range(256)
)

DEFAULT_CAPACITY: Final = 256 * 1024
# By default, below this much free space at the buffer's end the unread bytes move to its start.
MIN_FREE_BYTES: Final = 64 * 1024


def data_frame_header(stream_id: int, size: int, end_stream: bool) -> bytes:
    """The 9-byte header of an unpadded DATA frame carrying `size` bytes."""
    return _HEADER.pack(size >> 8, size & 0xFF, TYPE_DATA, FLAG_END_STREAM * end_stream, stream_id)


def window_update_frame(stream_id: int, increment: int) -> bytes:
    if not 0 < increment <= MAX_WINDOW:
        raise ValueError(f"WINDOW_UPDATE increment {increment} outside 1..{MAX_WINDOW}")
    return _WINDOW_UPDATE.pack(0, 4, TYPE_WINDOW_UPDATE, 0, stream_id, increment)


def window_updates(stream_id: int, connection_increment: int, stream_increment: int) -> bytes:
    """The connection's WINDOW_UPDATE, the stream's, or both (connection first; 0: none, not
    both 0). Both is what every DATA frame earns at small windows, so it is one packing, its
    increments unchecked: they come from `ReceiveWindow.consume`, never above its target."""
    if connection_increment and stream_increment:
        return _WINDOW_UPDATE_PAIR.pack(
            0, 4, TYPE_WINDOW_UPDATE, 0, 0, connection_increment,
            0, 4, TYPE_WINDOW_UPDATE, 0, stream_id, stream_increment,
        )  # fmt: skip
    if connection_increment:
        return window_update_frame(0, connection_increment)
    return window_update_frame(stream_id, stream_increment)


def window_increment(buffer: bytearray, payload_start: int) -> int:
    """The 32 bits of a WINDOW_UPDATE payload as they are. Only 1..2^31-1 is an increment the
    fast path may apply: hyperframe refuses 0 and values with the reserved bit set (h2 answers
    PROTOCOL_ERROR), so those go to h2."""
    return int(_INCREMENT.unpack_from(buffer, payload_start)[0])


class FrameReader:
    """Receive buffer and frame splitter for one direction of one connection.

    Use: `get_buffer()` -> the kernel writes into it -> `commit(n)` -> `next_frame()` until it
    returns None. A frame's payload is `buffer[start:start + length]`, valid until the next
    `get_buffer()`. `raw(...)` gives the bytes h2 must see instead. `next_frame` raises h2's
    ProtocolError for a header h2's reader would refuse; the stream is finished then (the
    caller sends the GOAWAY for `error_code` and closes)."""

    __slots__ = (
        "_frame_start",
        "buffer",
        "end",
        "header_block",
        "max_frame_size",
        "min_free",
        "preface_left",
        "start",
        "view",
    )

    def __init__(
        self,
        max_frame_size: int,
        preface_bytes: int = 0,
        capacity: int = DEFAULT_CAPACITY,
        min_free: int = MIN_FREE_BYTES,
    ) -> None:
        self.min_free = min_free  # free bytes each read is offered, at least
        self.buffer = bytearray(capacity)
        self.view = memoryview(self.buffer)
        self.start = 0  # first unread byte
        self.end = 0  # one past the last received byte
        self._frame_start = 0  # header of the frame `next_frame` returned last
        self.max_frame_size = max_frame_size
        self.preface_left = preface_bytes
        # Inside a header block (HEADERS or PUSH_PROMISE without END_HEADERS) only h2 may judge
        # the frames: RFC 9113 allows nothing but CONTINUATION there.
        self.header_block = False

    def get_buffer(self) -> memoryview:
        """Free space for the next read (at least `min_free` or the frame being received)."""
        start, end = self.start, self.end
        if start == end:
            self.start = self.end = 0
        elif (
            len(self.buffer) - end < self.min_free
            or self._pending_frame_bytes() > len(self.buffer) - start
        ):
            self._make_room()
        return self.view[self.end :]

    def commit(self, nbytes: int) -> None:
        self.end += nbytes

    def take_preface(self) -> bytes:
        """Connection-preface bytes received so far (h2 checks them), consumed."""
        taken = min(self.preface_left, self.end - self.start)
        data = bytes(self.view[self.start : self.start + taken])
        self.start += taken
        self.preface_left -= taken
        return data

    def take_all(self) -> bytes:
        """Every unread byte, consumed (the connection failed: they are only counted)."""
        data = bytes(self.view[self.start : self.end])
        self.start = self.end
        return data

    def next_frame(self) -> tuple[int, int, int, int, int] | None:
        """(type, flags, stream id, payload start, length) of the next whole frame, or None.

        Raises ProtocolError (PROTOCOL_ERROR) for a frame on the wrong kind of stream and
        FrameTooLargeError (FRAME_SIZE_ERROR) for one longer than `max_frame_size`, as soon as
        its header is here, leaving `start` at that header."""
        start = self.start
        if self.end - start < FRAME_HEADER_BYTES:
            return None
        high, low, frame_type, flags, stream_id = _HEADER.unpack_from(self.buffer, start)
        stream_id &= STREAM_ID_MASK
        # h2's order: the header's own checks, then the length.
        needs_stream = _NEEDS_STREAM[frame_type]
        if needs_stream is not None and needs_stream is not bool(stream_id):
            raise self._header_error(start)
        length = (high << 8) | low
        if length > self.max_frame_size:
            raise FrameTooLargeError(
                f"Received overlong frame: length {length}, max {self.max_frame_size}"
            )
        payload = start + FRAME_HEADER_BYTES
        if self.end - payload < length:
            return None
        self._frame_start = start
        self.start = payload + length
        return frame_type, flags, stream_id, payload, length

    def _header_error(self, start: int) -> ProtocolError:
        """h2's own error for a header hyperframe refuses, message and all."""
        try:
            Frame.parse_frame_header(self.view[start : start + FRAME_HEADER_BYTES])
        except InvalidDataError as exc:
            return ProtocolError(f"Received frame with invalid header: {exc!s}")
        return ProtocolError("Received frame with invalid header")  # pragma: no cover

    def raw(self) -> bytes:
        """The whole frame `next_frame` returned last, as bytes, for h2; tracks header blocks."""
        start = self._frame_start
        frame_type = self.buffer[start + 3]
        flags = self.buffer[start + 4]
        if frame_type in (TYPE_HEADERS, TYPE_PUSH_PROMISE):
            self.header_block = not flags & FLAG_END_HEADERS
        elif frame_type == TYPE_CONTINUATION and flags & FLAG_END_HEADERS:
            self.header_block = False
        return bytes(self.view[start : self.start])

    def _pending_frame_bytes(self) -> int:
        """Size of the partly received frame at `start` (0 while its header is incomplete),
        never more than a legal frame: the buffer is not grown for a length `next_frame`
        refuses."""
        if self.end - self.start < FRAME_HEADER_BYTES:
            return 0
        high: int
        low: int
        high, low = _HEADER.unpack_from(self.buffer, self.start)[:2]
        return FRAME_HEADER_BYTES + min((high << 8) | low, self.max_frame_size)

    def _make_room(self) -> None:
        start, end = self.start, self.end
        needed = max(self._pending_frame_bytes(), end - start) + self.min_free
        if needed > len(self.buffer):
            # A new buffer, not a resize: the transport may still hold a view of the old one.
            grown = bytearray(max(needed, 2 * len(self.buffer)))
            grown[: end - start] = self.view[start:end]
            self.buffer = grown
            self.view = memoryview(grown)
        else:
            self.buffer[: end - start] = self.view[start:end]
        self.start, self.end = 0, end - start


class SplitTally:
    """Frame counts of one direction of a connection whose fast path handles some frames.

    Bytes that pass through h2 go to a `FrameTally` (`feed`, whole frames or a stream's
    remainder, so it stays aligned); the fast path counts its own frames by bumping `frames` and
    `frame_bytes` (index: frame type), which costs less than walking their headers again."""

    __slots__ = ("_tally", "frame_bytes", "frames")

    def __init__(self, expect_preface: bool = False) -> None:
        self._tally = FrameTally(expect_preface=expect_preface)
        self.frames = [0] * 256
        self.frame_bytes = [0] * 256

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._tally.feed(data)

    def counts(self) -> FrameCounts:
        fed = self._tally.counts()
        frames = dict(fed.frames)
        frame_bytes = dict(fed.frame_bytes)
        total = fed.bytes_total
        for frame_type, count in enumerate(self.frames):
            if count:
                name = frame_type_name(frame_type)
                frames[name] = frames.get(name, 0) + count
                frame_bytes[name] = frame_bytes.get(name, 0) + self.frame_bytes[frame_type]
                total += self.frame_bytes[frame_type]
        return FrameCounts(frames, frame_bytes, total)


class Outgoing:
    """What a connection's next write sends, in order: h2's output, which the tally walks frame
    by frame, and the frames of `own_type` the fast path builds itself, which are only counted
    (`add_own`). With a `trace` (agent.h2.trace), each write's bytes also go to it, with the
    time."""

    __slots__ = ("_h2", "chunks", "own_bytes", "own_frames", "own_type", "trace")

    def __init__(self, own_type: int, trace: FrameTrace | None = None) -> None:
        self.trace = trace
        self.chunks: list[bytes | memoryview] = []
        self._h2: list[bytes] = []
        self.own_type = own_type
        self.own_frames = 0
        self.own_bytes = 0

    def add_own(self, data: bytes | memoryview, frame_bytes: int, frames: int = 1) -> None:
        """`frames` frames of `own_type` together `frame_bytes` long (or one frame's header, its
        payload to follow in `chunks`)."""
        self.chunks.append(data)
        self.own_frames += frames
        self.own_bytes += frame_bytes

    def add_h2(self, data: bytes) -> None:
        if data:
            self.chunks.append(data)
            self._h2.append(data)

    def write(self, transport: Any, tally: SplitTally) -> None:
        """Everything queued in one write (dropped if the transport is gone or closing), and
        into `tally`."""
        chunks = self.chunks
        if not chunks:
            return
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        if transport is not None and not transport.is_closing():
            for chunk in self._h2:
                tally.feed(chunk)
            tally.frames[self.own_type] += self.own_frames
            tally.frame_bytes[self.own_type] += self.own_bytes
            if self.trace is not None:
                self.trace.sent(data, time.monotonic_ns())
            transport.write(data)
        self._h2.clear()
        self.own_frames = self.own_bytes = 0


class H2Internals:
    """The attributes of h2's objects the fast path reads or writes, checked once.

    Connection: `state_machine.state`, `outbound_flow_control_window`, `streams`. Stream:
    `outbound_flow_control_window`, `_expected_content_length`, `_actual_content_length`.
    These exist from h2 3.x to at least 4.4; if a future h2 renames them, `available()` is
    False and the endpoints run on h2 alone."""

    _checked: bool | None = None

    @classmethod
    def available(cls) -> bool:
        if cls._checked is None:
            cls._checked = _probe_h2()
        return cls._checked

    @staticmethod
    def is_open(conn: H2Connection) -> bool:
        state: Any = conn.state_machine.state
        return state is ConnectionState.CLIENT_OPEN or state is ConnectionState.SERVER_OPEN

    @staticmethod
    def expected_length(stream: Any) -> int | None:
        value: int | None = stream._expected_content_length
        return value

    @staticmethod
    def set_received_length(stream: Any, received: int) -> None:
        """Make h2's body-length count what the fast path received, before h2 judges it."""
        stream._actual_content_length = received


def _probe_h2() -> bool:
    try:
        client = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        server = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        client.initiate_connection()
        client.send_headers(
            1,
            [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")],
            end_stream=True,
        )
        server.initiate_connection()
        server.receive_data(client.data_to_send())
        server.send_headers(1, [(b":status", b"200"), (b"content-length", b"3")])
        client.receive_data(server.data_to_send())
        stream: Any = client.streams[1]
        sent: Any = server.streams[1]
        return (
            H2Internals.is_open(client)
            and H2Internals.is_open(server)
            and stream._expected_content_length == 3
            and stream._actual_content_length == 0
            and isinstance(sent.outbound_flow_control_window, int)
            and isinstance(server.outbound_flow_control_window, int)
        )
    except (AttributeError, KeyError, ProtocolError, TypeError):
        return False
