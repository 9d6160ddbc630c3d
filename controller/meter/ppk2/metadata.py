"""The PPK2's metadata reply: parse it strictly, format it (for the emulator), find it in a buffer.

Command 0x19 answers ASCII lines `KEY: VALUE`, then a line `END`. The firmware's order (the one
`format_metadata` writes): `Calibrated`, `R0`-`R4`, `GS0`-`GS4`, `GI0`-`GI4`, `O0`-`O4`, `VDD`,
`HW`, `mode`, `S0`-`S4`, `I0`-`I4`, `UG0`-`UG4`, `IA`, `END`. Per range r the current in amperes
of a 14-bit ADC code `adc` is (ppk2-api 0.9.2 `get_adc_result`, nRF Connect's `getAdcResult`)::

    x = (4 * adc - O[r]) * (1.8 / 163840 / R[r])                    # amperes before the gains
    i = UG[r] * (x * (GS[r] * x + GI[r]) + (S[r] * VDD_V + I[r]))   # VDD_V: the set supply, volts

Contract of `parse_metadata`: every key of the table above exactly once, numbers finite, each
R > 0, `Calibrated` 0 or 1, `mode` 1 or 2, the last line `END`; anything else raises
`Ppk2MetadataError` with one line naming the key or line at fault. ppk2-api instead keeps its
built-in resistor values for any key it did not see (a reply split over two reads, a `R2: 0`
some devices send): that silently scales a range by the ratio of two resistors, so here a
split, truncated, repeated or malformed reply is refused and never completed from defaults.
Keys the table does not know are kept in `extra` (a newer firmware may add some).

`scan_metadata_reply` finds a complete reply in what the port delivered after 0x19, so stream
bytes a killed session left in the device's pipe, read before the reply, are set apart (see the
package docstring for the drain rule the session follows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

import numpy as np

from controller.errors import MeterError, MeterFrameError

RANGES: Final = 5
TOP_RANGE: Final = RANGES - 1
_PER_RANGE_KEYS: Final = ("R", "GS", "GI", "O", "S", "I", "UG")
_FIRST_KEY: Final = "Calibrated"
_REPLY_START: Final = f"{_FIRST_KEY}: ".encode()
_END: Final = "END"
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


class Ppk2Error(MeterError):
    """A PPK2 (or its emulation) failed or broke its protocol."""


class Ppk2MetadataError(Ppk2Error, MeterFrameError):
    """The metadata reply is split, incomplete, repeated or malformed; the message names why."""


class Ppk2Mode(IntEnum):
    """The `mode` of the metadata reply and the argument of command 0x11."""

    AMPERE = 1  # measures a current flowing through VIN-VOUT from an external supply
    SOURCE = 2  # powers the device under test from its own regulator and measures that


@dataclass(frozen=True, slots=True)
class RangeCalibration:
    """One measurement range's calibration (the reply's key for each field in brackets)."""

    resistor_ohm: float  # [R] the range's shunt resistor
    gain_quadratic_per_a: float  # [GS] multiplies x (amperes) inside the gain: x * (GS*x + GI)
    gain_linear: float  # [GI]
    offset_counts: float  # [O] ADC offset, in units of the code times 4 (what the formula uses)
    supply_slope_a_per_v: float  # [S] current offset proportional to the set supply voltage
    offset_a: float  # [I] constant current offset
    user_gain: float  # [UG] the user's gain (nRF Connect's "gain" per range; 1 by default)


@dataclass(frozen=True, slots=True)
class Ppk2Metadata:
    """The parsed reply. `vdd_mv` is the supply the device reported when asked; the conversion
    uses the supply the session set (command 0x0D), which the session knows."""

    calibrated: bool  # [Calibrated]
    ranges: tuple[RangeCalibration, ...]  # [R0..UG4] index = the range field of a sample word
    vdd_mv: int  # [VDD]
    hardware_id: int  # [HW]
    mode: Ppk2Mode  # [mode]
    ia: int  # [IA] reported by the firmware; its meaning is not documented (ppk2-api ignores it)
    extra: tuple[tuple[str, str], ...] = ()  # keys this parser does not know, in reply order

    def __post_init__(self) -> None:
        if len(self.ranges) != RANGES:
            raise ValueError(f"a PPK2 has {RANGES} ranges, not {len(self.ranges)}")


def _range_key(prefix: str, r: int) -> str:
    return f"{prefix}{r}"


def _key_order() -> tuple[str, ...]:
    def per_range(*prefixes: str) -> list[str]:
        return [_range_key(p, r) for p in prefixes for r in range(RANGES)]

    return (
        _FIRST_KEY,
        *per_range("R", "GS", "GI", "O"),
        "VDD",
        "HW",
        "mode",
        *per_range("S", "I", "UG"),
        "IA",
    )


KEY_ORDER: Final = _key_order()
_KNOWN: Final = frozenset(KEY_ORDER)


def _number(key: str, text: str) -> float:
    if not _NUMBER.fullmatch(text):
        raise Ppk2MetadataError(f"PPK2 metadata: {key} is not a finite number: {text!r}")
    return float(text)


def _integer(key: str, text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise Ppk2MetadataError(f"PPK2 metadata: {key} is not an integer: {text!r}")
    return int(text)


def _lines(reply: bytes | str) -> list[str]:
    if isinstance(reply, bytes):
        try:
            text = reply.decode("ascii")
        except UnicodeDecodeError as exc:
            raise Ppk2MetadataError(
                f"PPK2 metadata reply is not ASCII at byte {exc.start} "
                "(stream bytes mixed into it?)"
            ) from None
    else:
        text = reply
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline after END
    if not lines or lines[-1] != _END:
        raise Ppk2MetadataError(
            "PPK2 metadata reply incomplete: its last line is not END (a split or truncated reply)"
        )
    return lines[:-1]


def _pairs(lines: list[str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    found: dict[str, str] = {}
    extra: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        key, sep, value = line.partition(": ")
        if not sep or not key or key == _END:
            raise Ppk2MetadataError(f"PPK2 metadata line {number} is not 'KEY: VALUE': {line!r}")
        if key in seen:
            raise Ppk2MetadataError(
                f"PPK2 metadata key {key} appears twice (two replies run together?)"
            )
        seen.add(key)
        if key in _KNOWN:
            found[key] = value
        else:
            extra.append((key, value))
    for key in KEY_ORDER:
        if key not in found:
            raise Ppk2MetadataError(
                f"PPK2 metadata reply lacks key {key} (a split or truncated reply?)"
            )
    return found, extra


def parse_metadata(reply: bytes | str) -> Ppk2Metadata:
    """The reply of command 0x19 (from `Calibrated` to `END`, an optional newline after it)."""
    found, extra = _pairs(_lines(reply))
    ranges = []
    for r in range(RANGES):
        value = {p: _number(_range_key(p, r), found[_range_key(p, r)]) for p in _PER_RANGE_KEYS}
        if value["R"] <= 0:
            raise Ppk2MetadataError(
                f"PPK2 metadata: R{r} must be a positive resistance, got {found[f'R{r}']!r}"
            )
        ranges.append(
            RangeCalibration(
                resistor_ohm=value["R"],
                gain_quadratic_per_a=value["GS"],
                gain_linear=value["GI"],
                offset_counts=value["O"],
                supply_slope_a_per_v=value["S"],
                offset_a=value["I"],
                user_gain=value["UG"],
            )
        )
    calibrated = _integer(_FIRST_KEY, found[_FIRST_KEY])
    if calibrated not in (0, 1):
        raise Ppk2MetadataError(f"PPK2 metadata: Calibrated must be 0 or 1, got {calibrated}")
    mode = _integer("mode", found["mode"])
    if mode not in tuple(Ppk2Mode):
        raise Ppk2MetadataError(f"PPK2 metadata: mode must be 1 or 2, got {mode}")
    vdd_mv = _integer("VDD", found["VDD"])
    if vdd_mv < 0:
        raise Ppk2MetadataError(f"PPK2 metadata: VDD must not be negative, got {vdd_mv}")
    return Ppk2Metadata(
        calibrated=bool(calibrated),
        ranges=tuple(ranges),
        vdd_mv=vdd_mv,
        hardware_id=_integer("HW", found["HW"]),
        mode=Ppk2Mode(mode),
        ia=_integer("IA", found["IA"]),
        extra=tuple(extra),
    )


def _decimal(value: float) -> str:
    # Positional, shortest digits that read back as the same float: the firmware prints fixed
    # decimals (no exponent), and both parsers must see exactly the values the emulator uses.
    return str(np.format_float_positional(value, unique=True, trim="0"))


def format_metadata(metadata: Ppk2Metadata) -> bytes:
    """The reply as the firmware sends it, `END\\n` last; `parse_metadata` reads it back equal."""
    values: dict[str, str] = {
        _FIRST_KEY: str(int(metadata.calibrated)),
        "VDD": str(metadata.vdd_mv),
        "HW": str(metadata.hardware_id),
        "mode": str(int(metadata.mode)),
        "IA": str(metadata.ia),
    }
    for r, cal in enumerate(metadata.ranges):
        fields = (
            cal.resistor_ohm,
            cal.gain_quadratic_per_a,
            cal.gain_linear,
            cal.offset_counts,
            cal.supply_slope_a_per_v,
            cal.offset_a,
            cal.user_gain,
        )
        for prefix, value in zip(_PER_RANGE_KEYS, fields, strict=True):
            values[_range_key(prefix, r)] = _decimal(value)
    lines = [f"{key}: {values[key]}" for key in KEY_ORDER]
    lines += [f"{key}: {value}" for key, value in metadata.extra]
    return ("\n".join([*lines, _END]) + "\n").encode("ascii")


@dataclass(frozen=True, slots=True)
class MetadataScan:
    """What `scan_metadata_reply` made of a buffer: `stale + (reply or b"") + rest` is the buffer.

    `stale`: bytes before the reply (stream words an earlier session left), safe to drop.
    `reply`: the complete reply (`Calibrated: ` .. `END` and its line end), or None while
    incomplete; then `rest` is the undecided tail to keep and extend with later reads.
    """

    stale: bytes
    reply: bytes | None
    rest: bytes
    # The reply is whole up to `END` and only its line end may still come.
    awaits_line_end: bool = False


def scan_metadata_reply(buffer: bytes, *, line_end_due: bool = False) -> MetadataScan:
    """Find the first complete metadata reply in `buffer`: pure, call it again after each read.

    The reply is recognised by its first line (`Calibrated: `) and ends with the line end
    (`\n` or `\r\n`) of the first `END` after it: a read may stop between `END` and its
    newline, and a newline left behind would reach the sample stream, so until the byte after
    `END` has arrived the reply is incomplete (`awaits_line_end`), unless `line_end_due` says
    the caller waited long enough for it (a device may send none): then the reply ends at `END`.
    `END` followed by anything else ends the reply there. Whether the text between is a valid
    reply is `parse_metadata`'s question, so a reply with stream bytes inside it is found here
    and refused there.
    """
    start = buffer.find(_REPLY_START)
    if start < 0:
        keep = max(0, len(buffer) - (len(_REPLY_START) - 1))  # a start may straddle reads
        return MetadataScan(stale=buffer[:keep], reply=None, rest=buffer[keep:])
    end = buffer.find(_END.encode(), start + len(_REPLY_START))
    if end < 0:
        return MetadataScan(stale=buffer[:start], reply=None, rest=buffer[start:])
    end += len(_END)
    if buffer[end:] in (b"", b"\r"):  # its line end may be in the next read
        if not line_end_due:
            return MetadataScan(buffer[:start], None, buffer[start:], awaits_line_end=True)
        end = len(buffer)
    for newline in (b"\r\n", b"\n"):
        if buffer.startswith(newline, end):
            end += len(newline)
            break
    return MetadataScan(stale=buffer[:start], reply=buffer[start:end], rest=buffer[end:])
