"""A fake Arduino Mega on a pseudo-terminal: an STK500v2 bootloader (what avrdude -c wiring
talks to) that keeps the image it is given, then, once avrdude leaves programming mode, the
meter firmware's identity handshake (IDENTIFY -> ACK, INFO) with a configurable identity.

Enough of STK500v2 (Atmel AVR068) for avrdude 7.1 to sign on, read the signature, write and
read back (verify) flash pages.
"""

from __future__ import annotations

import os
import select
import struct
import threading
import tty
from dataclasses import dataclass, field
from pathlib import Path

from tests.firmware import _wire

MESSAGE_START, TOKEN = 0x1B, 0x0E
STATUS_CMD_OK, STATUS_CMD_FAILED, STATUS_CMD_UNKNOWN = 0x00, 0xC0, 0xC9
CMD_SIGN_ON, CMD_SET_PARAMETER, CMD_GET_PARAMETER = 0x01, 0x02, 0x03
CMD_LOAD_ADDRESS = 0x06
CMD_ENTER_PROGMODE_ISP, CMD_LEAVE_PROGMODE_ISP, CMD_CHIP_ERASE_ISP = 0x10, 0x11, 0x12
CMD_PROGRAM_FLASH_ISP, CMD_READ_FLASH_ISP = 0x13, 0x14
CMD_READ_FUSE_ISP, CMD_READ_LOCK_ISP, CMD_READ_SIGNATURE_ISP = 0x18, 0x1A, 0x1B
CMD_READ_OSCCAL_ISP, CMD_SPI_MULTI = 0x1C, 0x1D

SIGNATURE_M2560 = bytes([0x1E, 0x98, 0x01])
FLASH_BYTES = 256 * 1024
PARAMETERS = {0x90: 0x0F, 0x91: 0x02, 0x92: 0x0A, 0x94: 50, 0x95: 50, 0x98: 1}


def read_intel_hex(path: Path) -> dict[int, int]:
    """Address -> byte for every data byte of an Intel HEX file (record types 00, 02, 04)."""
    data: dict[int, int] = {}
    base = 0
    for line in path.read_text().split():
        raw = bytes.fromhex(line[1:])
        count, address, kind = raw[0], struct.unpack(">H", raw[1:3])[0], raw[3]
        assert sum(raw) & 0xFF == 0, f"{path}: bad checksum in {line}"
        if kind == 0x00:
            for i, byte in enumerate(raw[4 : 4 + count]):
                data[base + address + i] = byte
        elif kind == 0x02:
            base = struct.unpack(">H", raw[4:6])[0] << 4
        elif kind == 0x04:
            base = struct.unpack(">H", raw[4:6])[0] << 16
    return data


@dataclass
class Identity:
    protocol_version: int = 2
    version: tuple[int, int, int] = (1, 0, 0)
    mcu_id: int = 1
    board: str = "mega2560"

    def info_payload(self) -> bytes:
        return (
            struct.pack(
                "<BBBBBIBHIBBIB",
                self.protocol_version,
                *self.version,
                self.mcu_id,
                16_000_000,
                10,
                5000,
                1000,
                0x03,
                1,
                500_000,
                2,
            )
            + (b"\x00" if self.protocol_version >= 2 else b"")  # i2c_mask
            + self.board.encode()
        )


@dataclass
class FakeMega:
    identity: Identity = field(default_factory=Identity)
    flash: bytearray = field(default_factory=lambda: bytearray(b"\xff" * FLASH_BYTES))
    written: set[int] = field(default_factory=set)
    programmed: bool = False  # avrdude left programming mode: the "firmware" now runs
    corrupt_address: int | None = None  # a flash cell that does not keep what is written
    silent: bool = False  # the "firmware" never answers
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo of what the host writes, no line editing
        self.port = os.ttyname(self._slave)
        self._address = 0
        self._buf = b""
        self._app_reader = _wire.FrameReader()
        self._app_seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        os.close(self._master)
        os.close(self._slave)  # held open so the master never sees the host's hangups

    def image_matches(self, hex_path: Path) -> bool:
        """The flash holds exactly the .hex image; every other byte written was 0xFF padding."""
        expected = read_intel_hex(hex_path)
        if any(self.flash[a] != b for a, b in expected.items()):
            return False
        return all(self.flash[a] == 0xFF for a in self.written - expected.keys())

    # ---- transport ----

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self._master, 4096)
            except OSError:
                continue
            self._buf += data
            if self.programmed:
                self._app(self._buf)
                self._buf = b""
            else:
                self._bootloader()

    # ---- STK500v2 ----

    def _bootloader(self) -> None:
        while True:
            start = self._buf.find(bytes([MESSAGE_START]))
            if start < 0:
                self._buf = b""
                return
            buf = self._buf[start:]
            if len(buf) < 5:
                self._buf = buf
                return
            seq, size, token = buf[1], struct.unpack(">H", buf[2:4])[0], buf[4]
            if token != TOKEN or (len(buf) < 6 + size and size > 300):
                self._buf = buf[1:]
                continue
            if len(buf) < 6 + size:
                self._buf = buf
                return
            message, checksum = buf[: 5 + size], buf[5 + size]
            self._buf = buf[6 + size :]
            if _xor(message) != checksum:
                self.errors.append(f"bad checksum on seq {seq}")
                continue
            answer = self._command(message[5:])
            reply = bytes([MESSAGE_START, seq]) + struct.pack(">H", len(answer)) + bytes([TOKEN])
            reply += answer
            os.write(self._master, reply + bytes([_xor(reply)]))
            if message[5] == CMD_LEAVE_PROGMODE_ISP:
                self.programmed = True
                return

    def _command(self, body: bytes) -> bytes:  # one branch per command
        cmd = body[0]
        if cmd == CMD_SIGN_ON:
            return bytes([cmd, STATUS_CMD_OK, 8]) + b"AVRISP_2"
        if cmd == CMD_GET_PARAMETER:
            return bytes([cmd, STATUS_CMD_OK, PARAMETERS.get(body[1], 0)])
        if cmd in (CMD_SET_PARAMETER, CMD_ENTER_PROGMODE_ISP, CMD_LEAVE_PROGMODE_ISP):
            return bytes([cmd, STATUS_CMD_OK])
        if cmd == CMD_CHIP_ERASE_ISP:
            self.errors.append("chip erase requested: flash must be written with -D")
            return bytes([cmd, STATUS_CMD_OK])
        if cmd == CMD_LOAD_ADDRESS:
            # a word address; bit 31 asks for the extended (>64 KiB) address byte
            self._address = (struct.unpack(">I", body[1:5])[0] & 0x7FFFFFFF) * 2
            return bytes([cmd, STATUS_CMD_OK])
        if cmd == CMD_PROGRAM_FLASH_ISP:
            count = struct.unpack(">H", body[1:3])[0]
            data = body[10 : 10 + count]
            self.flash[self._address : self._address + count] = data
            self.written.update(range(self._address, self._address + count))
            if self.corrupt_address in range(self._address, self._address + count):
                self.flash[self.corrupt_address] ^= 0x01
            self._address += count
            return bytes([cmd, STATUS_CMD_OK])
        if cmd == CMD_READ_FLASH_ISP:
            count = struct.unpack(">H", body[1:3])[0]
            data = bytes(self.flash[self._address : self._address + count])
            self._address += count
            return bytes([cmd, STATUS_CMD_OK]) + data + bytes([STATUS_CMD_OK])
        if cmd == CMD_READ_SIGNATURE_ISP:
            index = body[4] & 0x03  # the third byte of the read-signature instruction
            return bytes([cmd, STATUS_CMD_OK, SIGNATURE_M2560[index % 3], STATUS_CMD_OK])
        if cmd in (CMD_READ_FUSE_ISP, CMD_READ_LOCK_ISP, CMD_READ_OSCCAL_ISP):
            return bytes([cmd, STATUS_CMD_OK, 0xFF, STATUS_CMD_OK])
        if cmd == CMD_SPI_MULTI:
            return bytes([cmd, STATUS_CMD_OK]) + bytes(body[2]) + bytes([STATUS_CMD_OK])
        self.errors.append(f"unknown STK500v2 command {cmd:#04x}")
        return bytes([cmd, STATUS_CMD_UNKNOWN])

    # ---- the firmware's identity handshake ----

    def _app(self, data: bytes) -> None:
        for frame in self._app_reader.feed(data):
            if frame.frame_type != _wire.IDENTIFY or self.silent:
                continue
            ack = struct.pack("<BHB", frame.frame_type, frame.seq, 0)
            info = self.identity.info_payload()
            out = _wire.encode_frame(_wire.ACK, self._app_seq, ack)
            out += _wire.encode_frame(_wire.INFO, self._app_seq + 1, info)
            self._app_seq += 2
            os.write(self._master, out)


def _xor(data: bytes) -> int:
    result = 0
    for byte in data:
        result ^= byte
    return result
