"""`h2iot firmware build|flash`: builds the meter firmware, and flashes it onto a board through
its bootloader with avrdude, then checks that the board reports the version just built."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.errors import ConfigError, ControllerError
from controller.firmware import (
    BOARDS,
    DEFAULT_BOARD,
    board_named,
    build,
    check_identity,
    read_identity,
    run_avrdude,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "firmware",
        help=COMMANDS["firmware"],
        description=__doc__,
        epilog=example("h2iot firmware flash --port /dev/ttyACM0"),
        formatter_class=FORMATTER,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    board_help = f"target board: {' or '.join(BOARDS)} (default {DEFAULT_BOARD})"

    build_parser = actions.add_parser(
        "build",
        help="compile the firmware (firmware/Makefile)",
        epilog=example("h2iot firmware build --board uno"),
        formatter_class=FORMATTER,
    )
    build_parser.add_argument("--board", default=DEFAULT_BOARD, help=board_help)
    build_parser.set_defaults(handler=_build)

    flash_parser = actions.add_parser(
        "flash",
        help="build, write it with avrdude, check the board's identity",
        epilog=example("h2iot firmware flash --port /dev/ttyACM0 --board mega2560"),
        formatter_class=FORMATTER,
    )
    flash_parser.add_argument("--port", help="the board's serial device, e.g. /dev/ttyACM0")
    flash_parser.add_argument("--board", default=DEFAULT_BOARD, help=board_help)
    flash_parser.add_argument(
        "--identify-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds to wait for the flashed board to identify itself (default 10)",
    )
    flash_parser.set_defaults(handler=_flash)


def _build(args: argparse.Namespace) -> int:
    try:
        board = board_named(args.board)
        result = build(board)
    except ControllerError as exc:
        return _fail(exc)
    print(f"built {result.board} firmware {result.version} ({result.baud} baud): {result.hex_path}")
    return 0


def _flash(args: argparse.Namespace) -> int:
    try:
        board = board_named(args.board)
        if not args.port:
            raise ConfigError("firmware flash needs --port PORT (the board's serial device)")
        if not os.path.exists(args.port):
            raise ConfigError(f"port {args.port}: no such device")
        result = build(board)
        run_avrdude(board, args.port, result.hex_path)
        info = read_identity(args.port, result.baud, args.identify_timeout)
        check_identity(info, result, board, args.port)
    except ControllerError as exc:
        return _fail(exc)
    print(
        f"flashed {board.name} firmware {result.version} to {args.port}: the board reports "
        f"{info.fw_version}, protocol {info.protocol_version}"
    )
    return 0


def _fail(exc: ControllerError) -> int:
    print(f"h2iot: error: {exc}", file=sys.stderr)
    return exc.exit_status
