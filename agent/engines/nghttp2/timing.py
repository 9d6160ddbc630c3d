"""Per-resource times of one nghttp run, from its HAR and its `-s` table. Pure.

All times are relative to nghttp's own start (just before name resolution), in seconds. The first
request's start, headers and end come from the HAR alone (microseconds); the other requests'
starts come from the `-s` table (relative to the connection's establishment, 10 us steps below
one second, 10 ms steps above), their headers and ends from the HAR's microsecond durations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.engines.nghttp2.errors import NghttpOutputError
from agent.engines.nghttp2.har import FIRST_STREAM, Har
from agent.engines.nghttp2.stats import StatRow


@dataclass(frozen=True)
class ResourceTimes:
    stream_id: int
    path: str
    status: int
    size_bytes: int
    start_s: float
    ttfb_s: float
    end_s: float


def resource_times(har: Har, rows: Sequence[StatRow]) -> tuple[ResourceTimes, ...]:
    """One entry per completed request, in order of completion."""
    starts_us = {row.stream_id: row.request_start_us for row in rows}
    times = []
    for entry in har.entries:
        if entry.stream_id == FIRST_STREAM:
            start_ms = entry.time_ms - entry.wait_ms - entry.receive_ms
            end_ms = entry.time_ms
        else:
            if har.connect_end_ms is None or entry.stream_id not in starts_us:
                raise NghttpOutputError(
                    f"nghttp: stream {entry.stream_id} has no start (HAR without the first "
                    "request, or missing from the -s table)"
                )
            start_ms = har.connect_end_ms + starts_us[entry.stream_id] / 1000
            end_ms = start_ms + entry.time_ms
        times.append(
            ResourceTimes(
                stream_id=entry.stream_id,
                path=urlsplit(entry.url).path or "/",
                status=entry.status,
                size_bytes=entry.size_bytes,
                start_s=start_ms / 1000,
                ttfb_s=(start_ms + entry.wait_ms) / 1000,
                end_s=end_ms / 1000,
            )
        )
    return tuple(sorted(times, key=lambda t: (t.end_s, t.stream_id)))
