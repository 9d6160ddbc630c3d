"""Host -> device commands: records, the encoder with its sequence counter, and the device-side
parser (used by the virtual meter) that maps a bad command to the ACK result it deserves."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from controller.meter.protocol import SEQ_MODULUS, AckResult, FrameType, encode_frame


@dataclass(frozen=True, slots=True)
class Identify:
    TYPE: ClassVar[int] = FrameType.IDENTIFY

    def payload(self) -> bytes:
        return b""


@dataclass(frozen=True, slots=True)
class Start:
    TYPE: ClassVar[int] = FrameType.START

    def payload(self) -> bytes:
        return b""


@dataclass(frozen=True, slots=True)
class Stop:
    TYPE: ClassVar[int] = FrameType.STOP

    def payload(self) -> bytes:
        return b""


@dataclass(frozen=True, slots=True)
class GetStatus:
    TYPE: ClassVar[int] = FrameType.GET_STATUS

    def payload(self) -> bytes:
        return b""


@dataclass(frozen=True, slots=True)
class SetRate:
    TYPE: ClassVar[int] = FrameType.SET_RATE
    rate_hz: int

    def payload(self) -> bytes:
        return struct.pack("<I", self.rate_hz)


@dataclass(frozen=True, slots=True)
class SetChannels:
    TYPE: ClassVar[int] = FrameType.SET_CHANNELS
    channel_mask: int

    def payload(self) -> bytes:
        return struct.pack("<B", self.channel_mask)


@dataclass(frozen=True, slots=True)
class SetOversampling:
    TYPE: ClassVar[int] = FrameType.SET_OVERSAMPLING
    oversampling: int

    def payload(self) -> bytes:
        return struct.pack("<B", self.oversampling)


@dataclass(frozen=True, slots=True)
class SetI2cChannels:
    """Protocol 2: bit n samples the INA219 at I2C address 0x40 + n (n = 0..3)."""

    TYPE: ClassVar[int] = FrameType.SET_I2C_CHANNELS
    i2c_mask: int

    def payload(self) -> bytes:
        return bytes([self.i2c_mask])


Command = (
    Identify | Start | Stop | GetStatus | SetRate | SetChannels | SetOversampling | SetI2cChannels
)

_EMPTY: dict[int, Command] = {
    FrameType.IDENTIFY: Identify(),
    FrameType.START: Start(),
    FrameType.STOP: Stop(),
    FrameType.GET_STATUS: GetStatus(),
}


class CommandRejected(ValueError):
    """A command the device must refuse; `result` is the ACK result to send back."""

    def __init__(self, result: AckResult, reason: str) -> None:
        super().__init__(reason)
        self.result = result


def parse_command(command_type: int, payload: bytes) -> Command:
    """The command in a received frame; raises CommandRejected for unknown types or sizes."""
    if command_type in _EMPTY:
        if payload:
            raise CommandRejected(AckResult.BAD_LENGTH, f"command {command_type:#04x} takes none")
        return _EMPTY[command_type]
    if command_type == FrameType.SET_RATE:
        if len(payload) != 4:
            raise CommandRejected(AckResult.BAD_LENGTH, "SET_RATE takes a u32")
        return SetRate(struct.unpack("<I", payload)[0])
    if command_type in (
        FrameType.SET_CHANNELS,
        FrameType.SET_OVERSAMPLING,
        FrameType.SET_I2C_CHANNELS,
    ):
        if len(payload) != 1:
            raise CommandRejected(AckResult.BAD_LENGTH, f"command {command_type:#04x} takes a u8")
        if command_type == FrameType.SET_CHANNELS:
            return SetChannels(payload[0])
        if command_type == FrameType.SET_I2C_CHANNELS:
            return SetI2cChannels(payload[0])
        return SetOversampling(payload[0])
    raise CommandRejected(AckResult.UNKNOWN_COMMAND, f"unknown command {command_type:#04x}")


class CommandEncoder:
    """Numbers outgoing commands (the host's own sequence, +1 per frame, wrapping at 2**16)."""

    def __init__(self, first_seq: int = 0) -> None:
        self._next_seq = first_seq % SEQ_MODULUS

    def encode(self, command: Command) -> tuple[int, bytes]:
        """(the sequence number used, the frame bytes)."""
        seq = self._next_seq
        self._next_seq = (seq + 1) % SEQ_MODULUS
        return seq, encode_frame(command.TYPE, seq, command.payload())
