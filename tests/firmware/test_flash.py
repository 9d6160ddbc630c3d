"""`h2iot firmware build|flash`: real avr-gcc, real avrdude 7.1, and a fake STK500v2 bootloader
on a pseudo-terminal that checks the image it receives and then answers like the firmware."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main
from controller.errors import ConfigError, FirmwareError
from controller.firmware import (
    BOARDS,
    Build,
    IdentifySession,
    avrdude_command,
    board_named,
    check_identity,
    read_manifest,
)
from controller.meter.protocol import Info
from tests.conftest import require_tool
from tests.firmware import _wire
from tests.firmware._fake_board import FakeMega, Identity

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"
MEGA_HEX = FIRMWARE / "build-mega2560" / "h2iot_meter.hex"
VERSION = (FIRMWARE / "VERSION").read_text().strip()


@pytest.fixture
def fake() -> Iterator[FakeMega]:
    board = FakeMega(identity=Identity(version=_version_tuple(VERSION)))
    yield board
    board.close()


def _version_tuple(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(part) for part in text.split("."))
    return major, minor, patch


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("h2iot: error: ")
    return lines[0]


def _tools() -> None:
    require_tool("make", "avr-gcc", "avrdude")


def test_flash_writes_the_built_image_and_checks_the_identity(fake: FakeMega, capsys) -> None:
    _tools()
    assert main(["firmware", "flash", "--port", fake.port]) == 0
    assert fake.programmed
    assert fake.errors == []
    assert fake.image_matches(MEGA_HEX)
    out = capsys.readouterr().out
    assert f"the board reports {VERSION}, protocol 2" in out


def test_a_board_speaking_another_protocol_version_is_refused(capsys) -> None:
    _tools()
    board = FakeMega(identity=Identity(protocol_version=3, version=_version_tuple(VERSION)))
    try:
        assert main(["firmware", "flash", "--port", board.port, "--identify-timeout", "5"]) == 1
    finally:
        board.close()
    assert "protocol version 3" in _one_line_error(capsys.readouterr().err)


def test_a_board_reporting_another_firmware_version_is_refused(capsys) -> None:
    _tools()
    board = FakeMega(identity=Identity(version=(0, 9, 0)))
    try:
        assert main(["firmware", "flash", "--port", board.port]) == 1
    finally:
        board.close()
    assert f"reports firmware 0.9.0, the build just flashed is {VERSION}" in _one_line_error(
        capsys.readouterr().err
    )


def test_a_failed_verify_is_a_one_line_error(capsys) -> None:
    _tools()
    board = FakeMega(corrupt_address=0x100)
    try:
        assert main(["firmware", "flash", "--port", board.port]) == 1
    finally:
        board.close()
    assert "avrdude failed" in _one_line_error(capsys.readouterr().err)


def test_a_silent_board_times_out_with_a_reason(capsys) -> None:
    _tools()
    board = FakeMega(silent=True)
    try:
        assert main(["firmware", "flash", "--port", board.port, "--identify-timeout", "1"]) == 1
    finally:
        board.close()
    assert "no identity from the board within 1 s (no bytes at all)" in _one_line_error(
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["firmware", "build", "--board", "due"], "unknown board 'due': use mega2560 or uno"),
        (["firmware", "flash", "--board", "due", "--port", "/dev/null"], "unknown board 'due'"),
        (["firmware", "flash"], "firmware flash needs --port PORT"),
        (["firmware", "flash", "--port", "/dev/h2iot-nothing"], "no such device"),
    ],
)
def test_user_mistakes_are_one_line_errors_with_status_2(argv, message, capsys) -> None:
    assert main(argv) == 2
    assert message in _one_line_error(capsys.readouterr().err)


# What the image must target: the AVR architecture in the ELF header's e_flags (avr5 for the
# ATmega328P, avr6 for the ATmega2560) and the flash it must fit (less the bootloader's).
TARGETS = {"mega2560": (6, 256 * 1024 - 8 * 1024), "uno": (5, 32 * 1024 - 512)}
EM_AVR = 83


def _elf_avr_arch(elf: Path) -> int:
    header = elf.read_bytes()[:52]
    assert header[:4] == b"\x7fELF" and header[4] == 1  # 32-bit
    assert int.from_bytes(header[18:20], "little") == EM_AVR
    return int.from_bytes(header[36:40], "little") & 0x7F  # EF_AVR_MACH


def _hex_image_bytes(hex_path: Path) -> int:
    """Data bytes of the Intel HEX records (type 00)."""
    lines = hex_path.read_text().split()
    return sum(int(line[1:3], 16) for line in lines if line[7:9] == "00")


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_build_makes_a_hex_and_a_manifest(board: str, capsys) -> None:
    require_tool("make", "avr-gcc")
    build_dir = FIRMWARE / f"build-{board}"
    # A build that did nothing must not pass on what an earlier one left.
    for product in ("h2iot_meter.hex", "h2iot_meter.elf", "firmware.json"):
        (build_dir / product).unlink(missing_ok=True)
    assert main(["firmware", "build", "--board", board]) == 0
    built = read_manifest(build_dir)
    assert built.board == board
    assert built.version == VERSION
    assert built.baud == 500_000
    assert built.hex_path.read_text().startswith(":")
    arch, flash_bytes = TARGETS[board]
    assert _elf_avr_arch(built.elf_path) == arch
    assert 1024 < _hex_image_bytes(built.hex_path) <= flash_bytes
    assert str(built.hex_path) in capsys.readouterr().out


# ---- the sans-IO parts ----


def test_avrdude_commands_use_each_bootloaders_protocol() -> None:
    mega = avrdude_command("avrdude", board_named("mega2560"), "/dev/ttyACM0", Path("a.hex"))
    assert mega == [
        "avrdude",
        "-C",
        "/etc/avrdude.conf",
        "-c",
        "wiring",
        "-p",
        "m2560",
        "-P",
        "/dev/ttyACM0",
        "-b",
        "115200",
        "-D",
        "-U",
        "flash:w:a.hex:i",
    ]
    uno = avrdude_command("avrdude", board_named("uno"), "/dev/ttyACM1", Path("b.hex"))
    assert uno[uno.index("-c") + 1] == "arduino"
    assert uno[uno.index("-p") + 1] == "m328p"


def _info(**changes: Any) -> Info:
    payload = Identity(version=_version_tuple(VERSION)).info_payload()
    return dataclasses.replace(Info.parse(1, payload), **changes)


BUILD = Build("mega2560", VERSION, 500_000, Path("x.hex"), Path("x.elf"))


def test_check_identity() -> None:
    mega = board_named("mega2560")
    check_identity(_info(), BUILD, mega, "P")
    with pytest.raises(FirmwareError, match="protocol version 3"):
        check_identity(_info(protocol_version=3), BUILD, mega, "P")
    with pytest.raises(FirmwareError, match="MCU id 2"):
        check_identity(_info(mcu_id=2, board="uno"), BUILD, mega, "P")
    with pytest.raises(FirmwareError, match=r"reports firmware 9\.9\.9"):
        check_identity(_info(fw_major=9, fw_minor=9, fw_patch=9), BUILD, mega, "P")


def test_identify_session_needs_the_ack_first_and_survives_noise() -> None:
    session = IdentifySession("P")
    request = session.request()
    assert request == _wire.encode_frame(_wire.IDENTIFY, 0)
    info = Identity(version=_version_tuple(VERSION)).info_payload()
    # an INFO before our ACK (e.g. from an earlier session) does not count
    assert session.receive(_wire.encode_frame(_wire.INFO, 7, info)) is None
    stream = (
        b"\x00\xa5garbage"
        + _wire.encode_frame(_wire.ACK, 8, bytes([_wire.IDENTIFY, 0, 0, 0]))
        + _wire.encode_frame(_wire.INFO, 9, info)
    )
    found = [session.receive(stream[i : i + 1]) for i in range(len(stream))]
    assert [f.fw_version for f in found if f is not None] == [VERSION]


def test_identify_session_reports_a_rejected_identify() -> None:
    session = IdentifySession("P")
    session.request()
    with pytest.raises(FirmwareError, match="rejected IDENTIFY"):
        session.receive(_wire.encode_frame(_wire.ACK, 0, bytes([_wire.IDENTIFY, 0, 0, 3])))


def test_a_missing_manifest_is_a_firmware_error(tmp_path: Path) -> None:
    with pytest.raises(FirmwareError, match="unreadable build manifest"):
        read_manifest(tmp_path)


def test_unknown_board_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        board_named("leonardo")
    assert os.path.exists(FIRMWARE / "Makefile")
