"""A trial's event trace as qlog in JSON-SEQ (draft-ietf-quic-qlog-main-schema, RFC 7464): a
header record (`qlog_version`, `qlog_format`, one `trace` with its `vantage_point` and
`common_fields`), then one record per event (`time`, `name`, `data`), each record preceded by
the record separator 0x1E and followed by a newline.

Sans-IO: `encode` returns the bytes; the caller writes them. A trace longer than `max_bytes` is cut
at a record boundary and ends with one `h2iot:trace_cut` event saying how many events were left
out, so a reader knows it is not whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

QLOG_VERSION = "0.3"
QLOG_FORMAT = "JSON-SEQ"
RECORD_SEPARATOR = b"\x1e"
CUT_EVENT = "h2iot:trace_cut"
DEFAULT_MAX_BYTES = 20_000_000
# Room kept for the cut event (its counts are at most 20 digits each).
_CUT_ROOM_BYTES = 160
MIN_MAX_BYTES = 4_096
"""The smallest limit taken: room for the header record, the cut event and a few events."""


def encode(
    vantage_point: str,
    title: str,
    events: Iterable[Mapping[str, Any]],
    common_fields: Mapping[str, Any],
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> bytes:
    """The JSON-SEQ file: its header record, then `events` until the next would take it past
    `max_bytes` (then the cut event). `vantage_point`: "client" or "server"."""
    header = {
        "qlog_version": QLOG_VERSION,
        "qlog_format": QLOG_FORMAT,
        "title": title,
        "trace": {"vantage_point": {"type": vantage_point}, "common_fields": dict(common_fields)},
    }
    records = [_record(header)]
    size = len(records[0])
    budget = max_bytes - _CUT_ROOM_BYTES
    kept = dropped = 0
    last_time: object = 0
    for event in events:
        if dropped:
            dropped += 1
            continue
        record = _record(event)
        if size + len(record) > budget:
            dropped = 1
            continue
        records.append(record)
        size += len(record)
        kept += 1
        last_time = event.get("time", last_time)
    if dropped:
        cut = {
            "time": last_time,
            "name": CUT_EVENT,
            "data": {"events_kept": kept, "events_dropped": dropped, "max_bytes": max_bytes},
        }
        records.append(_record(cut))
    return b"".join(records)


def cut(data: bytes, max_bytes: int) -> bytes:
    """A JSON-SEQ trace another program wrote (ngtcp2's), kept as it is when within
    `max_bytes`, else cut at the last record that fits with the cut event after it. Its
    records are not re-encoded: the trace stays the tool's own."""
    if len(data) <= max_bytes:
        return data
    budget = max_bytes - _CUT_ROOM_BYTES
    end = data.rfind(RECORD_SEPARATOR, 0, budget + 1)
    kept_part = data[: max(end, 0)]
    records = kept_part.count(RECORD_SEPARATOR)
    cut_event = {
        "time": _last_time(kept_part),
        "name": CUT_EVENT,
        "data": {
            # The header record is not an event.
            "events_kept": max(records - 1, 0),
            "events_dropped": data.count(RECORD_SEPARATOR) - records,
            "max_bytes": max_bytes,
        },
    }
    return kept_part + _record(cut_event)


def _last_time(data: bytes) -> object:
    start = data.rfind(RECORD_SEPARATOR)
    try:
        last = json.loads(data[start + 1 :]) if start >= 0 else {}
    except ValueError:
        return 0
    return last.get("time", 0) if isinstance(last, dict) else 0


def _record(value: Mapping[str, Any]) -> bytes:
    return RECORD_SEPARATOR + json.dumps(value, separators=(",", ":")).encode() + b"\n"
