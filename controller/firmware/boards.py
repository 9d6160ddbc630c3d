"""The boards the meter firmware builds for, and how each one's bootloader is programmed."""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Board:
    name: str  # the Makefile target and INFO's board name
    mcu_id: int  # INFO's mcu_id
    avrdude_part: str  # avrdude -p
    avrdude_programmer: str  # avrdude -c: the bootloader's protocol
    upload_baud: int  # the bootloader's baud rate


BOARDS: dict[str, Board] = {
    # The Mega 2560's bootloader speaks STK500v2 ("wiring" toggles DTR to reset into it).
    "mega2560": Board("mega2560", 1, "m2560", "wiring", 115_200),
    # The Uno's Optiboot speaks STK500v1 ("arduino").
    "uno": Board("uno", 2, "m328p", "arduino", 115_200),
}
DEFAULT_BOARD = "mega2560"


def board_named(name: str) -> Board:
    try:
        return BOARDS[name]
    except KeyError:
        raise ConfigError(f"unknown board {name!r}: use {' or '.join(BOARDS)}") from None
