"""gpiod.line's enums, as in libgpiod v2's bindings."""

from __future__ import annotations

import enum


class Direction(enum.Enum):
    AS_IS = 1
    INPUT = 2
    OUTPUT = 3


class Value(enum.Enum):
    INACTIVE = 0
    ACTIVE = 1
