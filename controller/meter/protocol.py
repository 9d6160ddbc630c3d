"""Meter wire protocol, version 2: frame layout, frame records and their payload codecs.

The contract is firmware/PROTOCOL.md (written from notes/meter-protocol-contract.md). A frame is
`A5 5A | length u16 | type u8 | seq u16 | payload | crc u16`, little-endian, the CRC-16/CCITT-FALSE
covering length..payload. This module knows the layout; the scanner lives in `decoder.py`.
"""

from __future__ import annotations

import binascii
import enum
import struct
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

PROTOCOL_VERSION = 2
SYNC = b"\xa5\x5a"
HEADER_BYTES = 7  # sync, length, type, seq
OVERHEAD_BYTES = HEADER_BYTES + 2  # plus the CRC
MAX_PAYLOAD_BYTES = 1024
SEQ_MODULUS = 1 << 16
SAMPLE_INDEX_MODULUS = 1 << 32
BOARD_NAME_MAX_BYTES = 16
MAX_COLUMNS = 8  # values per sample: one per analog input, two per INA219
I2C_CHANNELS = 4  # INA219s or INA226s at I2C addresses 0x40 .. 0x43
INA219_ADDR_BASE = 0x40
# i2c_mask bits 4..7 (firmware 1.2.0): bit 4 + n marks the chip at 0x40 + n as an INA226
INA226_KIND_SHIFT = 4
MAX_CHANNELS = 4  # analog inputs and I2C monitors together
# PROTOCOL.md section 4's value ranges, which a board's INFO must report within.
RATE_MIN_HZ, RATE_MAX_HZ = 100, 10_000
OVERSAMPLING_MAX = 16
ADC_BITS_MIN, ADC_BITS_MAX = 8, 16

_HEADER = struct.Struct("<2sHBH")
_CRC = struct.Struct("<H")


def crc16(data: bytes | bytearray | memoryview) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF): binascii's crc_hqx is exactly it, in C."""
    return binascii.crc_hqx(data, 0xFFFF)


def encode_frame(frame_type: int, seq: int, payload: bytes = b"") -> bytes:
    """One complete frame on the wire."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    body = _HEADER.pack(SYNC, len(payload), frame_type, seq % SEQ_MODULUS)[2:] + payload
    return SYNC + body + _CRC.pack(crc16(body))


class FrameType(enum.IntEnum):
    """Frame types; 0x01-0x7F travel device -> host, 0x81-0xFF host -> device."""

    INFO = 0x01
    SAMPLES = 0x02
    MARKER = 0x03
    STATUS = 0x04
    ACK = 0x05
    IDENTIFY = 0x81
    START = 0x82
    STOP = 0x83
    SET_RATE = 0x84
    SET_CHANNELS = 0x85
    GET_STATUS = 0x86
    SET_OVERSAMPLING = 0x87
    SET_I2C_CHANNELS = 0x88


class AckResult(enum.IntEnum):
    OK = 0
    BAD_LENGTH = 1
    BAD_VALUE = 2
    UNKNOWN_COMMAND = 3
    BUSY = 4


class McuId(enum.IntEnum):
    ATMEGA2560 = 1
    ATMEGA328P = 2


class PayloadError(ValueError):
    """A frame passed its CRC but its payload does not fit its type (the sender's bug)."""


def channels_of_mask(mask: int) -> tuple[int, ...]:
    """Analog input numbers (n of An) selected by a channel mask, ascending."""
    return tuple(n for n in range(8) if mask >> n & 1)


def i2c_addresses_of_mask(mask: int) -> tuple[int, ...]:
    """I2C addresses of the chips (INA219 or INA226) an I2C channel mask selects, ascending."""
    return tuple(INA219_ADDR_BASE + n for n in range(I2C_CHANNELS) if mask >> n & 1)


def ina226_addresses_of_mask(mask: int) -> tuple[int, ...]:
    """Those of them the mask marks as INA226s (bit 4 + n), ascending."""
    return i2c_addresses_of_mask(mask >> INA226_KIND_SHIFT & mask)


def printable(text: str) -> str:
    """Text a device sent, safe to print: anything but printable ASCII becomes a `\\xNN` escape.
    A board name is the device's to choose; raw, its escape codes would drive the terminal."""
    return "".join(c if " " <= c <= "~" else f"\\x{ord(c):02x}" for c in text)


_INFO = struct.Struct("<BBBBBIBHIBBIB")  # protocol 1 and 2; 2 adds i2c_mask (u8) after it


@dataclass(frozen=True, slots=True)
class Info:
    """The board's identity and current configuration (answer to IDENTIFY); PROTOCOL.md names."""

    TYPE: ClassVar[int] = FrameType.INFO
    seq: int
    protocol_version: int
    fw_major: int
    fw_minor: int
    fw_patch: int
    mcu_id: int
    f_cpu_hz: int
    adc_bits: int
    adc_ref_mv: int
    sample_rate_hz: int
    channel_mask: int
    oversampling: int
    baud: int
    marker_pin: int
    board: str
    # protocol 2: bit n = the chip at 0x40 + n is sampled; bit 4 + n: it is an INA226 (1.2.0)
    i2c_mask: int = 0

    @property
    def channels(self) -> tuple[int, ...]:
        return channels_of_mask(self.channel_mask)

    @property
    def i2c_addresses(self) -> tuple[int, ...]:
        return i2c_addresses_of_mask(self.i2c_mask)

    @property
    def ina226_addresses(self) -> tuple[int, ...]:
        return ina226_addresses_of_mask(self.i2c_mask)

    @property
    def columns(self) -> int:
        """Values per sample in SAMPLES: analog inputs first, then (shunt, bus) per chip."""
        return len(self.channels) + 2 * len(self.i2c_addresses)

    @property
    def fw_version(self) -> str:
        return f"{self.fw_major}.{self.fw_minor}.{self.fw_patch}"

    def payload(self) -> bytes:
        return (
            _INFO.pack(
                self.protocol_version,
                self.fw_major,
                self.fw_minor,
                self.fw_patch,
                self.mcu_id,
                self.f_cpu_hz,
                self.adc_bits,
                self.adc_ref_mv,
                self.sample_rate_hz,
                self.channel_mask,
                self.oversampling,
                self.baud,
                self.marker_pin,
            )
            + (bytes([self.i2c_mask]) if self.protocol_version >= 2 else b"")
            + self.board.encode("ascii")[:BOARD_NAME_MAX_BYTES]
        )

    @classmethod
    def parse(cls, seq: int, payload: bytes) -> Info:
        """Protocol 1 and 2 INFO (the version is its first byte), so a session can name an old
        firmware's version instead of failing on its layout."""
        fixed = _INFO.size + (1 if payload[:1] >= b"\x02" else 0)
        if not fixed <= len(payload) <= fixed + BOARD_NAME_MAX_BYTES:
            raise PayloadError(
                f"INFO payload of {len(payload)} bytes, expected {fixed}.."
                f"{fixed + BOARD_NAME_MAX_BYTES}"
            )
        (ver, major, minor, patch, mcu, f_cpu, bits, ref, rate, mask, over, baud, pin) = (
            _INFO.unpack_from(payload)
        )
        i2c_mask = payload[_INFO.size] if fixed > _INFO.size else 0
        # Latin-1 maps each byte to one character, so every byte is escaped on its own.
        board = printable(payload[fixed:].decode("latin-1"))
        return cls(
            seq,
            ver,
            major,
            minor,
            patch,
            mcu,
            f_cpu,
            bits,
            ref,
            rate,
            mask,
            over,
            baud,
            pin,
            board,
            i2c_mask,
        )


def info_problem(info: Info) -> str | None:
    """What makes a board's INFO unusable (outside PROTOCOL.md's ranges), or None. A board that
    samples at 0 Hz or no input would otherwise fail later, far from its cause (a division by
    its rate, an empty sample column)."""
    inputs = len(info.channels) + len(info.i2c_addresses)
    mask = f"channel_mask {info.channel_mask:#04x} with i2c_mask {info.i2c_mask:#04x}"
    problems = (
        (
            not RATE_MIN_HZ <= info.sample_rate_hz <= RATE_MAX_HZ,
            f"sample_rate_hz {info.sample_rate_hz} is outside {RATE_MIN_HZ}..{RATE_MAX_HZ}",
        ),
        (inputs == 0, f"{mask} selects no channel"),
        (inputs > MAX_CHANNELS, f"{mask} selects {inputs} channels, at most {MAX_CHANNELS}"),
        (
            not 1 <= info.oversampling <= OVERSAMPLING_MAX,
            f"oversampling {info.oversampling} is outside 1..{OVERSAMPLING_MAX}",
        ),
        (
            not ADC_BITS_MIN <= info.adc_bits <= ADC_BITS_MAX,
            f"adc_bits {info.adc_bits} is outside {ADC_BITS_MIN}..{ADC_BITS_MAX}",
        ),
        (info.adc_ref_mv == 0, "adc_ref_mv 0 is outside 1..65535"),
    )
    return next((problem for wrong, problem in problems if wrong), None)


_SAMPLES_HEAD = struct.Struct("<IB")

SampleArray = npt.NDArray[np.uint16]


@dataclass(frozen=True, slots=True, eq=False)
class Samples:
    """Consecutive samples: `values[i, c]` is column c of sample `first_sample_index + i`.

    Columns: one per analog input (ascending), then two per INA219 (ascending address): its
    shunt-voltage and bus-voltage registers, raw (`ina219.py` decodes them).

    `values` is read-only. The index is the device's u32 counter since START (it wraps after
    2**32 samples; `SampleStore` unwraps it).
    """

    TYPE: ClassVar[int] = FrameType.SAMPLES
    seq: int
    first_sample_index: int
    values: SampleArray

    @property
    def count(self) -> int:
        return int(self.values.shape[0])

    @property
    def columns(self) -> int:
        return int(self.values.shape[1])

    @property
    def channel_count(self) -> int:
        """The number of value columns (= channels while only analog inputs are sampled)."""
        return self.columns

    def payload(self) -> bytes:
        return (
            _SAMPLES_HEAD.pack(self.first_sample_index % SAMPLE_INDEX_MODULUS, self.channel_count)
            + self.values.astype("<u2", copy=False).tobytes()
        )

    @classmethod
    def parse(cls, seq: int, payload: bytes) -> Samples:
        return parse_samples(seq, payload, 0, len(payload))


def parse_samples(seq: int, buf: bytes, offset: int, length: int) -> Samples:
    """SAMPLES payload at `buf[offset:offset+length]`; the values are a zero-copy view of buf."""
    if length < _SAMPLES_HEAD.size:
        raise PayloadError(f"SAMPLES payload of {length} bytes is shorter than its header")
    first, columns = _SAMPLES_HEAD.unpack_from(buf, offset)
    value_bytes = length - _SAMPLES_HEAD.size
    if not 1 <= columns <= MAX_COLUMNS or value_bytes % (2 * columns) or not value_bytes:
        raise PayloadError(f"SAMPLES payload: {value_bytes} value bytes for {columns} columns")
    values = np.frombuffer(
        buf, dtype="<u2", count=value_bytes // 2, offset=offset + _SAMPLES_HEAD.size
    ).reshape(-1, columns)  # a view of immutable bytes: read-only, no copy
    return Samples(seq, first, values)


_MARKER = struct.Struct("<IBB")


@dataclass(frozen=True, slots=True)
class Marker:
    """An edge on the marker pin, stamped with the sample index at which it happened."""

    TYPE: ClassVar[int] = FrameType.MARKER
    seq: int
    sample_index: int
    pin: int
    edge: int  # 1 rising, 0 falling

    @property
    def rising(self) -> bool:
        return self.edge == 1

    def payload(self) -> bytes:
        return _MARKER.pack(self.sample_index % SAMPLE_INDEX_MODULUS, self.pin, self.edge)

    @classmethod
    def parse(cls, seq: int, payload: bytes) -> Marker:
        _expect_size("MARKER", payload, _MARKER.size)
        index, pin, edge = _MARKER.unpack(payload)
        if edge not in (0, 1):
            raise PayloadError(f"MARKER edge {edge}, expected 0 or 1")
        return cls(seq, index, pin, edge)


_STATUS = struct.Struct("<IIIHB")


@dataclass(frozen=True, slots=True)
class Status:
    """The device's counters; `samples_dropped` were sampled but never sent (link too slow)."""

    TYPE: ClassVar[int] = FrameType.STATUS
    seq: int
    samples_taken: int
    samples_dropped: int
    frames_sent: int
    commands_rejected: int
    running: bool

    def payload(self) -> bytes:
        return _STATUS.pack(
            self.samples_taken % SAMPLE_INDEX_MODULUS,
            self.samples_dropped % SAMPLE_INDEX_MODULUS,
            self.frames_sent % SAMPLE_INDEX_MODULUS,
            self.commands_rejected % SEQ_MODULUS,
            int(self.running),
        )

    @classmethod
    def parse(cls, seq: int, payload: bytes) -> Status:
        _expect_size("STATUS", payload, _STATUS.size)
        taken, dropped, sent, rejected, running = _STATUS.unpack(payload)
        if running not in (0, 1):
            raise PayloadError(f"STATUS running flag {running}, expected 0 or 1")
        return cls(seq, taken, dropped, sent, rejected, bool(running))


_ACK = struct.Struct("<BHB")


@dataclass(frozen=True, slots=True)
class Ack:
    """The device's answer to the command `command_type` it received with `command_seq`."""

    TYPE: ClassVar[int] = FrameType.ACK
    seq: int
    command_type: int
    command_seq: int
    result: int

    def payload(self) -> bytes:
        return _ACK.pack(self.command_type, self.command_seq, self.result)

    @classmethod
    def parse(cls, seq: int, payload: bytes) -> Ack:
        _expect_size("ACK", payload, _ACK.size)
        return cls(seq, *_ACK.unpack(payload))


Frame = Info | Samples | Marker | Status | Ack

DEVICE_FRAME_TYPES: dict[int, type[Info] | type[Marker] | type[Status] | type[Ack]] = {
    FrameType.INFO: Info,
    FrameType.MARKER: Marker,
    FrameType.STATUS: Status,
    FrameType.ACK: Ack,
}


def _expect_size(name: str, payload: bytes, size: int) -> None:
    if len(payload) != size:
        raise PayloadError(f"{name} payload of {len(payload)} bytes, expected {size}")


def encode_device_frame(frame: Frame) -> bytes:
    return encode_frame(frame.TYPE, frame.seq, frame.payload())
