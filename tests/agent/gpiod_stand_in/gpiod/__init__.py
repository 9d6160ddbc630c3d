"""A stand-in for libgpiod's v2 Python bindings (`gpiod`): the part of their interface the
agent's GPIO marker uses, recording every call as a JSON line in the file named by
H2IOT_GPIOD_LOG, so a test can check the line request and the edge order.

It models one chip, /dev/gpiochip0, with 54 lines (a Raspberry Pi's GPIO bank): another path
raises FileNotFoundError and a line beyond the bank ValueError, as the real bindings do.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from gpiod import line

__all__ = ["LineRequest", "LineSettings", "line", "request_lines"]

CHIP = "/dev/gpiochip0"
NUM_LINES = 54


def _log(call: str, **fields: Any) -> None:
    with open(os.environ["H2IOT_GPIOD_LOG"], "a") as file:
        file.write(json.dumps({"call": call, **fields}) + "\n")


@dataclass
class LineSettings:
    direction: line.Direction = line.Direction.AS_IS
    output_value: line.Value = line.Value.INACTIVE


class LineRequest:
    def __init__(self, offsets: list[int]) -> None:
        self._offsets = offsets
        self._released = False

    def set_value(self, offset: int, value: line.Value) -> None:
        if self._released:
            raise RuntimeError("line request has been released")
        if offset not in self._offsets:
            raise ValueError(f"offset {offset} was not requested")
        _log("set_value", offset=offset, value=value.name)

    def release(self) -> None:
        self._released = True
        _log("release")


def request_lines(
    path: str, consumer: str | None = None, config: dict[int, LineSettings | None] | None = None
) -> LineRequest:
    if path != CHIP:
        raise FileNotFoundError(2, "No such file or directory", path)
    offsets = list(config or {})
    for offset in offsets:
        if not 0 <= offset < NUM_LINES:
            raise ValueError("invalid offset")
    _log(
        "request_lines",
        path=path,
        consumer=consumer,
        config={
            str(offset): None if s is None else [s.direction.name, s.output_value.name]
            for offset, s in (config or {}).items()
        },
    )
    return LineRequest(offsets)
