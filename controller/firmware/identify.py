"""Asks a board who it is (IDENTIFY -> ACK, INFO) and checks the answer against the build.

`IdentifySession` is the sans-IO part; `read_identity` is its pyserial shell.
"""

from __future__ import annotations

import time

import serial

from controller.errors import DeviceError, FirmwareError
from controller.firmware.boards import Board
from controller.firmware.build import Build
from controller.meter.decoder import FrameDecoder
from controller.meter.protocol import PROTOCOL_VERSION, Ack, FrameType, Info, encode_frame

# A real board resets when its port opens and its bootloader listens for about a second
# before the firmware starts: IDENTIFY is repeated until an answer comes.
IDENTIFY_INTERVAL_S = 0.25


class IdentifySession:
    """Bytes in, the board's INFO out (after an OK ACK of one of our IDENTIFY commands)."""

    def __init__(self, port: str) -> None:
        self._port = port
        self._decoder = FrameDecoder()
        self._sent: set[int] = set()
        self._acked = False

    def request(self) -> bytes:
        seq = len(self._sent)
        self._sent.add(seq)
        return encode_frame(FrameType.IDENTIFY, seq)

    def receive(self, data: bytes) -> Info | None:
        for frame in self._decoder.feed(data):
            if (
                isinstance(frame, Ack)
                and frame.command_type == FrameType.IDENTIFY
                and frame.command_seq in self._sent
            ):
                if frame.result != 0:
                    raise FirmwareError(f"{self._port}: the board rejected IDENTIFY ({frame})")
                self._acked = True
            elif isinstance(frame, Info) and self._acked:
                return frame
        return None

    def silence_reason(self) -> str:
        """Why no INFO came, as far as the bytes tell."""
        stats = self._decoder.stats
        if self._acked and self._decoder.last_error:
            error = self._decoder.last_error
            return f"its INFO does not parse as protocol {PROTOCOL_VERSION}: {error}"
        if stats.frames_ok:
            return f"{stats.frames_ok} frames but no answer to IDENTIFY"
        if stats.bytes_in:
            return f"{stats.bytes_in} bytes but no intact frame (wrong baud or not our firmware?)"
        return "no bytes at all"


def check_identity(info: Info, build: Build, board: Board, port: str) -> None:
    if info.protocol_version != PROTOCOL_VERSION:
        raise FirmwareError(
            f"{port}: the board speaks meter protocol version {info.protocol_version}, "
            f"this controller speaks {PROTOCOL_VERSION}"
        )
    if info.mcu_id != board.mcu_id:
        raise FirmwareError(
            f"{port}: the board reports MCU id {info.mcu_id} ({info.board!r}), "
            f"expected {board.mcu_id} ({board.name})"
        )
    if info.fw_version != build.version:
        raise FirmwareError(
            f"{port}: the board reports firmware {info.fw_version}, "
            f"the build just flashed is {build.version}"
        )


def read_identity(port: str, baud: int, timeout_s: float) -> Info:
    session = IdentifySession(port)
    try:
        link = serial.Serial(port, baud, timeout=0.05, xonxoff=False, rtscts=False)
    except (serial.SerialException, OSError) as exc:
        raise DeviceError(f"{port}: cannot open the serial port ({exc})") from None
    with link:
        deadline = time.monotonic() + timeout_s
        next_request = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() >= next_request:
                link.write(session.request())
                next_request = time.monotonic() + IDENTIFY_INTERVAL_S
            info = session.receive(link.read(4096))
            if info is not None:
                return info
    raise FirmwareError(
        f"{port}: no identity from the board within {timeout_s:g} s ({session.silence_reason()})"
    )
