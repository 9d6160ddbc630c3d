"""A run's wall-clock instants as ISO 8601 in the run's time zone.

The zone is, first, the manifest's `time_zone` (an IANA name such as "Europe/Berlin", or a fixed
offset "+01:00", "UTC"); else the controller's local UTC offset as the run id records it (the
sweep names a new run folder `<name>-YYYYmmddTHHMMSS` in the controller's local time, moments
before it writes `created_wall_ns`, so the two differ by the offset); else UTC. `Zone.note`
says which, so a report can say so. Pure: the manifest in, text out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_STAMP = re.compile(r"(\d{8}T\d{6})$")
_OFFSET = re.compile(r"^(?:UTC)?([+-])(\d{2}):?(\d{2})$")
# Zones are whole quarter hours; the folder's stamp is taken before the manifest's instant,
# seconds (a slow start: minutes) earlier.
_QUARTER_HOUR = timedelta(minutes=15)
_STAMP_SLACK = timedelta(minutes=5)
_LARGEST_OFFSET = timedelta(hours=14)
_NS = 1_000_000_000


@dataclass(frozen=True)
class Zone:
    tz: tzinfo
    name: str  # "Europe/Berlin", "UTC+01:00", "UTC"
    note: str  # where the zone comes from, for the reader

    def describe(self) -> str:
        return f"{self.name}; {self.note}"


def _fixed(offset: timedelta) -> tuple[tzinfo, str]:
    if not offset:
        return UTC, "UTC"
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return timezone(offset), f"UTC{sign}{hours:02d}:{rest:02d}"


def _recorded(text: str) -> tuple[tzinfo, str] | None:
    if text.upper() in ("UTC", "Z"):
        return UTC, "UTC"
    match = _OFFSET.match(text)
    if match:
        sign, hours, minutes = match.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes)) * (-1 if sign == "-" else 1)
        return _fixed(offset) if offset <= _LARGEST_OFFSET else None
    try:
        return ZoneInfo(text), text
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _from_run_id(run_id: str, created_ns: int) -> timedelta | None:
    """The controller's UTC offset: its local time in the run id minus the manifest's instant."""
    match = _STAMP.search(run_id)
    if match is None:
        return None
    try:
        local = datetime.strptime(match.group(1), "%Y%m%dT%H%M%S")
    except ValueError:
        return None
    created = datetime.fromtimestamp(created_ns // _NS, UTC).replace(tzinfo=None)
    difference = local - created
    offset = round(difference / _QUARTER_HOUR) * _QUARTER_HOUR
    if abs(difference - offset) > _STAMP_SLACK or abs(offset) > _LARGEST_OFFSET:
        return None
    return offset


def created_ns(manifest: Mapping[str, Any]) -> int | None:
    value = manifest.get("created_wall_ns")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def zone_of(manifest: Mapping[str, Any], run_name: str) -> Zone:
    """The zone a run's times are shown in, and where it comes from (module doc)."""
    recorded = manifest.get("time_zone")
    unknown = ""
    if isinstance(recorded, str) and recorded:
        found = _recorded(recorded)
        if found is not None:
            return Zone(*found, "the manifest's time_zone")
        unknown = f"the manifest's time_zone {recorded!r} is not a zone known here"
    run_id = manifest.get("run_id")
    created = created_ns(manifest)
    offset = (
        None
        if created is None
        else _from_run_id(run_id if isinstance(run_id, str) else run_name, created)
    )
    none = unknown or "the manifest records no time zone"
    if offset is not None:
        tz, name = _fixed(offset)
        return Zone(tz, name, f"the controller's local offset, read from the run id; {none}")
    return Zone(UTC, "UTC", none)


def iso(ns: float, zone: Zone) -> str:
    """Wall-clock nanoseconds since the epoch as ISO 8601 to the second, in `zone`."""
    if not math.isfinite(ns):
        return "-"
    return datetime.fromtimestamp(int(ns) // _NS, zone.tz).isoformat(timespec="seconds")


def duration_text(seconds: float) -> str:
    """A span for a reader: 8 s, 12 min 5 s, 3 h 20 min."""
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.3g} s" if seconds < 10 else f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
