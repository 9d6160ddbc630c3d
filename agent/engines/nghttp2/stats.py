"""Parse the request table nghttp prints with `-s` (nghttp2 1.x).

One row per completed request, sorted by completion:
`id  responseEnd requestStart  process code size request path`, e.g.
`  9    +90.76ms      +1.17ms  89.59ms  200   1M /img/photo-1.jpg`. Times are relative to the
connection's establishment; nghttp prints them as `67us`, `1.17ms` (10 us steps) or `1.23s`
(10 ms steps). A `*` before requestStart marks a pushed response. `size` is rounded (`1M`): the
HAR has the exact body sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.engines.nghttp2.errors import NghttpOutputError

TABLE_HEADER = "id  responseEnd requestStart  process code size request path"
_ROW = re.compile(
    r"\s*(?P<id>\d+)\s+\+(?P<end>\S+)\s+(?P<pushed>\*?)\s*\+(?P<start>\S+)\s+(?P<process>\S+)"
    r"\s+(?P<status>\d+)\s+(?P<size>\S+)\s(?P<path>.*)"
)
_DURATION = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>us|ms|s)")
_UNIT_US = {"us": 1, "ms": 1_000, "s": 1_000_000}


@dataclass(frozen=True)
class StatRow:
    stream_id: int
    response_end_us: int
    request_start_us: int
    process_us: int
    pushed: bool
    status: int
    size_text: str
    path: str


def parse_duration_us(text: str) -> int:
    """`67us`, `1.17ms`, `1.23s` -> microseconds."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise NghttpOutputError(f"nghttp -s: {text!r} is not a duration")
    return round(float(match["value"]) * _UNIT_US[match["unit"]])


def parse_stats(text: str) -> tuple[StatRow, ...]:
    """The rows of the request table; NghttpOutputError if the table is missing or mangled."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == TABLE_HEADER)
    except StopIteration:
        raise NghttpOutputError("nghttp -s: no request table in its output") from None
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        match = _ROW.fullmatch(line)
        if match is None:
            raise NghttpOutputError(f"nghttp -s: cannot read the row {line.strip()!r}")
        rows.append(
            StatRow(
                stream_id=int(match["id"]),
                response_end_us=parse_duration_us(match["end"]),
                request_start_us=parse_duration_us(match["start"]),
                process_us=parse_duration_us(match["process"]),
                pushed=match["pushed"] == "*",
                status=int(match["status"]),
                size_text=match["size"],
                path=match["path"],
            )
        )
    return tuple(rows)
