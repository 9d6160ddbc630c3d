"""The config's value readers, each a function `(value) -> value` raising `Invalid` with the
reason: what the schema (controller.config.schema) is built of, and what a kind's own config
check may use."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

NONE = "none"
"""The spelling of "unset" in TOML, which has no null."""
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class Invalid(Exception):
    """One value is wrong; `at` extends the dotted key (".name" or "[index]")."""

    def __init__(self, message: str, at: str = "") -> None:
        super().__init__(message)
        self.at = at


Reader = Callable[[Any], Any]
Schema = Mapping[str, "Reader | Schema"]


def key_text(key: str) -> str:
    """A key as TOML would need it written: bare if it can be, else quoted (always one line)."""
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a float"),
    (str, "a string"),
    (list, "an array"),
    (dict, "a table"),
)


def describe(value: Any) -> str:
    """The TOML type of a value, with the value when it is short."""
    kind = next((name for cls, name in _KINDS if isinstance(value, cls)), "a date/time")
    if isinstance(value, list | dict):
        return kind
    if isinstance(value, str) and len(value) > 40:
        value = value[:37] + "..."
    shown = json.dumps(value) if isinstance(value, str | bool) else str(value)
    return f"{kind} ({shown})"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(low: int, high: int) -> Reader:
    def read(value: Any) -> int:
        if not is_int(value):
            raise Invalid(f"expected an integer, got {describe(value)}")
        if not low <= value <= high:
            raise Invalid(f"{value} is outside {low}..{high}")
        return int(value)

    return read


def number(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Reader:
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"

    def read(value: Any) -> float:
        if not (is_int(value) or isinstance(value, float)):
            raise Invalid(f"expected a number, got {describe(value)}")
        number = float(value)
        if not math.isfinite(number):
            raise Invalid(f"{value} is not a finite number")
        above = number > low if low_open else number >= low
        below = number < high if high_open else number <= high
        if not (above and below):
            raise Invalid(f"{value} is outside {interval}")
        return number

    return read


def choice(options: tuple[Any, ...]) -> Reader:
    shown = ", ".join(json.dumps(option) for option in options)

    def read(value: Any) -> Any:
        if isinstance(value, bool) or value not in options:
            raise Invalid(f"expected one of {shown}, got {describe(value)}")
        return value

    return read


def text(pattern: re.Pattern[str], what: str) -> Reader:
    def read(value: Any) -> str:
        if not isinstance(value, str):
            raise Invalid(f"expected a string, got {describe(value)}")
        if not pattern.fullmatch(value):
            hint = "; put the user name in the node's user key" if "@" in value else ""
            raise Invalid(f"{json.dumps(value)} is not {what}{hint}")
        return value

    return read


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"expected true or false, got {describe(value)}")
    return value


def optional(reader: Reader) -> Reader:
    def read(value: Any) -> Any:
        return None if value == NONE else reader(value)

    return read
