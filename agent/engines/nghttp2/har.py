"""Parse the HAR file nghttp writes with `-r PATH` (nghttp2 1.x): per completed request, the
stream, URL, status, body size and nghttp's own timings.

nghttp's HAR timings are microsecond counts printed as milliseconds. `time` is the response end
relative to nghttp's start (before name resolution) for the first request (stream 1), and
relative to the request's start for the others; `wait` runs from the request's start to the
response headers, `receive` from there to the last byte. `dns` + `connect` of the first entry is
when the connection was up, relative to nghttp's start. Only requests that completed appear.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent.engines.nghttp2.errors import NghttpOutputError

FIRST_STREAM = 1


@dataclass(frozen=True)
class HarEntry:
    stream_id: int
    url: str
    status: int
    size_bytes: int
    time_ms: float
    wait_ms: float
    receive_ms: float


@dataclass(frozen=True)
class Har:
    entries: tuple[HarEntry, ...]
    connect_end_ms: float | None  # None when the first request did not complete


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NghttpOutputError(f"nghttp HAR: {where} is not a number: {value!r}")
    return float(value)


def _entry(raw: Any, index: int) -> tuple[HarEntry, float | None]:
    where = f"entries[{index}]"
    try:
        timings = raw["timings"]
        stream = raw["connection"]
        entry = HarEntry(
            stream_id=int(stream),
            url=str(raw["request"]["url"]),
            status=int(raw["response"]["status"]),
            size_bytes=int(raw["response"]["content"]["size"]),
            time_ms=_number(raw["time"], f"{where}.time"),
            wait_ms=_number(timings["wait"], f"{where}.timings.wait"),
            receive_ms=_number(timings["receive"], f"{where}.timings.receive"),
        )
        connect = None
        if entry.stream_id == FIRST_STREAM:
            connect = _number(timings["dns"], f"{where}.timings.dns") + _number(
                timings["connect"], f"{where}.timings.connect"
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise NghttpOutputError(f"nghttp HAR: {where} lacks or mangles {exc}") from None
    return entry, connect


def parse_har(text: str) -> Har:
    """The completed requests of one nghttp run; NghttpOutputError if the HAR is malformed."""
    try:
        document = json.loads(text)
        raw_entries = document["log"]["entries"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise NghttpOutputError(f"nghttp HAR: not a HAR log ({exc})") from None
    if not isinstance(raw_entries, list):
        raise NghttpOutputError("nghttp HAR: log.entries is not an array")
    entries = []
    connect_end: float | None = None
    for index, raw in enumerate(raw_entries):
        entry, connect = _entry(raw, index)
        entries.append(entry)
        if connect is not None:
            connect_end = connect
    return Har(tuple(entries), connect_end)
