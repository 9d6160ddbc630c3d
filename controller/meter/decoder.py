"""Sans-IO frame decoder: bytes in, frames out, with counters for everything it had to reject.

The scanner looks for the sync word with `bytes.find`, checks the length bound and the CRC (C code
in binascii) and only then parses the payload, so a frame is either intact or never seen. After a
rejection it resumes one byte past the rejected sync word, which recovers every intact frame that
follows garbage, a truncated frame or a bit flip. Sequence numbers reveal frames lost entirely.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.meter.protocol import (
    DEVICE_FRAME_TYPES,
    HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    OVERHEAD_BYTES,
    SEQ_MODULUS,
    SYNC,
    Frame,
    FrameType,
    PayloadError,
    parse_samples,
)

T = TypeVar("T")

DEVICE_MAX_PAYLOAD_BYTES = 16  # the firmware's receive limit (PROTOCOL.md, resynchronising)


@dataclass(frozen=True, slots=True)
class DecoderStats:
    """Counters since the decoder was made.

    `crc_failures` counts rejected frame candidates (a bad CRC, or a CRC that passes only by
    swallowing an intact frame that starts inside it): a damaged frame counts once, and sync-like
    bytes met while resynchronising can add more. `frames_missed` is the sum of the sequence gaps:
    frames that never arrived intact (frames lost after the last intact one cannot be known).
    """

    bytes_in: int = 0
    frames_ok: int = 0
    bytes_discarded: int = 0
    crc_failures: int = 0
    length_errors: int = 0
    truncated_frames: int = 0
    malformed_frames: int = 0
    unknown_types: int = 0
    sequence_gaps: int = 0
    frames_missed: int = 0


@dataclass(frozen=True, slots=True)
class RawFrame:
    """A CRC-checked frame whose payload is left to the caller (the device side's commands)."""

    frame_type: int
    seq: int
    payload: bytes


class _Scanner(Generic[T]):
    def __init__(self, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self._max_payload = max_payload_bytes
        self._buf = b""
        self._expected_seq: int | None = None
        self._bytes_in = 0
        self._frames_ok = 0
        self._discarded = 0
        self._crc_failures = 0
        self._length_errors = 0
        self._truncated = 0
        self._malformed = 0
        self._unknown = 0
        self._gaps = 0
        self._missed = 0
        self.last_error: str | None = None

    @property
    def stats(self) -> DecoderStats:
        return DecoderStats(
            self._bytes_in,
            self._frames_ok,
            self._discarded,
            self._crc_failures,
            self._length_errors,
            self._truncated,
            self._malformed,
            self._unknown,
            self._gaps,
            self._missed,
        )

    @property
    def pending_bytes(self) -> int:
        return len(self._buf)

    def forget_sequence(self) -> None:
        """Accept the next frame's sequence number as a fresh start (the device was reset)."""
        self._expected_seq = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[T]:
        """Every complete intact frame now decodable; an incomplete tail waits for more bytes."""
        self._bytes_in += len(data)
        return self._scan(self._buf + data if self._buf else bytes(data), final=False)

    def flush(self) -> list[T]:
        """End of input: give up on incomplete frames and recover any intact frame behind them."""
        return self._scan(self._buf, final=True)

    def _parse(self, frame_type: int, seq: int, buf: bytes, offset: int, length: int) -> T | None:
        raise NotImplementedError

    def _scan(self, buf: bytes, *, final: bool) -> list[T]:
        out: list[T] = []
        find = buf.find
        n = len(buf)
        pos = 0
        while True:
            i = find(SYNC, pos)
            if i < 0:
                # A trailing 0xA5 may be the first half of the next sync word.
                keep = n - 1 if n > pos and buf[n - 1] == 0xA5 and not final else n
                self._discarded += keep - pos
                pos = keep
                break
            self._discarded += i - pos
            pos = i
            end = self._check_candidate(buf, i, n, final)
            if end < 0:
                break
            if end == 0:
                self._discarded += 1
                pos = i + 1
                continue
            pos = end
            seq = buf[i + 5] | buf[i + 6] << 8
            if seq != self._expected_seq and self._expected_seq is not None:
                self._gaps += 1
                self._missed += (seq - self._expected_seq) % SEQ_MODULUS
            self._expected_seq = (seq + 1) % SEQ_MODULUS
            self._frames_ok += 1
            frame_type = buf[i + 4]
            try:
                frame = self._parse(
                    frame_type, seq, buf, i + HEADER_BYTES, end - i - OVERHEAD_BYTES
                )
            except PayloadError as exc:
                self._malformed += 1
                self.last_error = f"frame type {frame_type:#04x} seq {seq}: {exc}"
                continue
            if frame is None:
                self._unknown += 1
                self.last_error = f"frame type {frame_type:#04x} seq {seq}: unknown type"
                continue
            out.append(frame)
        self._buf = buf[pos:]
        return out

    def _check_candidate(self, buf: bytes, i: int, n: int, final: bool) -> int:
        """The end of the intact frame at buf[i]; 0 if it is rejected (and counted); -1 if more
        bytes are needed to decide."""
        end = _intact_frame_end(buf, i, n, self._max_payload)
        if end > 0:
            # A CRC over a truncated frame plus whatever followed it passes once in 65536
            # tries; an intact frame starting inside the candidate exposes that.
            j = buf.find(SYNC, i + 1, end + 1)
            while j >= 0:
                inner = _intact_frame_end(buf, j, n, self._max_payload)
                if inner > 0:
                    self._crc_failures += 1
                    return 0
                if inner in (_NEED_HEADER, _NEED_PAYLOAD) and not final:
                    return -1
                j = buf.find(SYNC, j + 1, end + 1)
            return end
        if end in (_NEED_HEADER, _NEED_PAYLOAD):
            if not final:
                return -1
            self._truncated += 1
        elif end == _BAD_LENGTH:
            self._length_errors += 1
        else:
            self._crc_failures += 1
        return 0


_BAD_CRC = 0
_BAD_LENGTH = -1
_NEED_HEADER = -2
_NEED_PAYLOAD = -3


def _intact_frame_end(buf: bytes, i: int, n: int, max_payload: int) -> int:
    """The end of the intact frame at buf[i], else why not (a _BAD_* or _NEED_* code)."""
    if n - i < OVERHEAD_BYTES:
        return _NEED_HEADER
    length = buf[i + 2] | buf[i + 3] << 8
    if length > max_payload:
        return _BAD_LENGTH
    end = i + OVERHEAD_BYTES + length
    if end > n:
        return _NEED_PAYLOAD
    if binascii.crc_hqx(buf[i + 2 : end - 2], 0xFFFF) != buf[end - 2] | buf[end - 1] << 8:
        return _BAD_CRC
    return end


class FrameDecoder(_Scanner[Frame]):
    """Device -> host frames (INFO, SAMPLES, MARKER, STATUS, ACK); other types are counted."""

    def _parse(
        self, frame_type: int, seq: int, buf: bytes, offset: int, length: int
    ) -> Frame | None:
        if frame_type == FrameType.SAMPLES:
            return parse_samples(seq, buf, offset, length)
        record = DEVICE_FRAME_TYPES.get(frame_type)
        if record is None:
            return None
        return record.parse(seq, buf[offset : offset + length])


class CommandFrameDecoder(_Scanner[RawFrame]):
    """Host -> device frames, raw: the device answers even unknown commands with an ACK.

    Commands carry at most 4 payload bytes; like the firmware, longer frames are not frames.
    """

    def __init__(self, max_payload_bytes: int = DEVICE_MAX_PAYLOAD_BYTES) -> None:
        super().__init__(max_payload_bytes)

    def _parse(
        self, frame_type: int, seq: int, buf: bytes, offset: int, length: int
    ) -> RawFrame | None:
        return RawFrame(frame_type, seq, buf[offset : offset + length])
