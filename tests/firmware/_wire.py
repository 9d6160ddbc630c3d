"""A minimal reader and writer of the meter protocol (firmware/PROTOCOL.md) for these tests.

Deliberately independent of controller/meter: the firmware is checked against the spec, not
against the other implementation.
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass

import numpy as np

SYNC = b"\xa5\x5a"
INFO, SAMPLES, MARKER, STATUS, ACK = 0x01, 0x02, 0x03, 0x04, 0x05
IDENTIFY, START, STOP, SET_RATE, SET_CHANNELS, GET_STATUS, SET_OVERSAMPLING = range(0x81, 0x88)
SET_I2C_CHANNELS = 0x88


def crc16(data: bytes) -> int:
    return binascii.crc_hqx(data, 0xFFFF)


def encode_frame(frame_type: int, seq: int, payload: bytes = b"") -> bytes:
    body = struct.pack("<HBH", len(payload), frame_type, seq) + payload
    return SYNC + body + struct.pack("<H", crc16(body))


@dataclass(frozen=True)
class Frame:
    frame_type: int
    seq: int
    payload: bytes


class FrameReader:
    """Bytes in, CRC-checked frames out; resynchronises one byte past any rejected candidate."""

    def __init__(self) -> None:
        self._buf = b""
        self.rejected = 0

    def feed(self, data: bytes) -> list[Frame]:
        buf = self._buf + data
        out: list[Frame] = []
        i = 0
        while True:
            i = buf.find(SYNC, i)
            if i < 0 or len(buf) - i < 9:
                break
            length, frame_type, seq = struct.unpack_from("<HBH", buf, i + 2)
            if length > 1024:
                self.rejected += 1
                i += 1
                continue
            end = i + 9 + length
            if end > len(buf):
                break
            (crc,) = struct.unpack_from("<H", buf, end - 2)
            if crc != crc16(buf[i + 2 : end - 2]):
                self.rejected += 1
                i += 1
                continue
            out.append(Frame(frame_type, seq, buf[i + 7 : end - 2]))
            i = end
        self._buf = buf[i:] if i >= 0 else buf[-1:]
        return out


@dataclass(frozen=True)
class Status:
    samples_taken: int
    samples_dropped: int
    frames_sent: int
    commands_rejected: int
    running: int


def status(frame: Frame) -> Status:
    return Status(*struct.unpack("<IIIHB", frame.payload))


def samples(frame: Frame) -> tuple[int, np.ndarray]:
    """(first_sample_index, values[sample, channel])."""
    first, channels = struct.unpack_from("<IB", frame.payload)
    values = np.frombuffer(frame.payload, dtype="<u2", offset=5)
    return first, values.reshape(-1, channels)


def marker(frame: Frame) -> tuple[int, int, int]:
    """(sample_index, pin, edge)."""
    index, pin, edge = struct.unpack("<IBB", frame.payload)
    return index, pin, edge


def ack(frame: Frame) -> tuple[int, int, int]:
    """(command_type, command_seq, result)."""
    command_type, command_seq, result = struct.unpack("<BHB", frame.payload)
    return command_type, command_seq, result


def info_version(frame: Frame) -> tuple[int, str]:
    """(protocol_version, "major.minor.patch")."""
    protocol, major, minor, patch = frame.payload[:4]
    return protocol, f"{major}.{minor}.{patch}"
