"""Builds the firmware with firmware/Makefile and reads what was built from its manifest."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from controller.errors import FirmwareError
from controller.firmware.boards import Board
from controller.paths import FIRMWARE_DIR


@dataclass(frozen=True, slots=True)
class Build:
    board: str
    version: str  # firmware/VERSION at build time: what the board must report after flashing
    baud: int
    hex_path: Path
    elf_path: Path


def build(board: Board, firmware_dir: Path = FIRMWARE_DIR) -> Build:
    """Runs `make BOARD` (incremental) and returns the build's manifest."""
    if not (firmware_dir / "Makefile").is_file():
        raise FirmwareError(f"{firmware_dir}: no firmware Makefile (run from a source checkout)")
    make = shutil.which("make")
    if make is None:
        raise FirmwareError("make not found on PATH (Debian packages: see .ci/apt/firmware.txt)")
    result = subprocess.run(
        [make, "-s", "-C", str(firmware_dir), board.name],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise FirmwareError(f"building {board.name} failed: {_last_line(result.stderr)}")
    return read_manifest(firmware_dir / f"build-{board.name}")


def read_manifest(build_dir: Path) -> Build:
    path = build_dir / "firmware.json"
    try:
        data = json.loads(path.read_text())
        return Build(
            board=str(data["board"]),
            version=str(data["version"]),
            baud=int(data["baud"]),
            hex_path=build_dir / str(data["hex"]),
            elf_path=build_dir / str(data["hex"]).replace(".hex", ".elf"),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FirmwareError(f"{path}: unreadable build manifest ({exc})") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no output"])[-1]
