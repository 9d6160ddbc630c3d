"""Building the meter firmware and flashing it onto a board, with an identity check after."""

from __future__ import annotations

from controller.firmware.boards import BOARDS, DEFAULT_BOARD, Board, board_named
from controller.firmware.build import Build, build, read_manifest
from controller.firmware.flash import avrdude_command, run_avrdude
from controller.firmware.identify import IdentifySession, check_identity, read_identity

__all__ = [
    "BOARDS",
    "DEFAULT_BOARD",
    "Board",
    "Build",
    "IdentifySession",
    "avrdude_command",
    "board_named",
    "build",
    "check_identity",
    "read_identity",
    "read_manifest",
    "run_avrdude",
]
