"""Programs a board through its bootloader with avrdude."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from controller.errors import FirmwareError
from controller.firmware.boards import Board

# Debian's avrdude reads its part database from here; arduino-mk's default path is missing.
AVRDUDE_CONF = Path("/etc/avrdude.conf")


def avrdude_command(
    avrdude: str, board: Board, port: str, hex_path: Path, conf: Path = AVRDUDE_CONF
) -> list[str]:
    """-D: no chip erase; the bootloader erases each page as it writes it (and must survive)."""
    return [
        avrdude,
        "-C",
        str(conf),
        "-c",
        board.avrdude_programmer,
        "-p",
        board.avrdude_part,
        "-P",
        port,
        "-b",
        str(board.upload_baud),
        "-D",
        "-U",
        f"flash:w:{hex_path}:i",
    ]


def run_avrdude(board: Board, port: str, hex_path: Path, timeout_s: float = 120.0) -> str:
    """Writes and verifies the image; returns avrdude's report, raises FirmwareError on failure."""
    avrdude = shutil.which("avrdude")
    if avrdude is None:
        raise FirmwareError("avrdude not found on PATH (Debian package avrdude)")
    try:
        result = subprocess.run(
            avrdude_command(avrdude, board, port, hex_path),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FirmwareError(f"{port}: avrdude gave no result within {timeout_s:.0f} s") from None
    if result.returncode != 0:
        raise FirmwareError(f"{port}: avrdude failed: {_avrdude_error(result.stderr)}")
    return result.stderr


def _avrdude_error(report: str) -> str:
    # avrdude prefixes its own messages with "avrdude" (and, on a pty, warns about modem
    # control ioctls it cannot use): the last error line is the one that explains the failure.
    lines = [line.strip() for line in report.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() and "ioctl" not in line]
    return (errors or lines or ["no output"])[-1]
