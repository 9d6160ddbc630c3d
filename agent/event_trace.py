"""Writing a trial's event trace on its node: `<dir>/<trial_id>.<role>.sqlog`, qlog in JSON-SEQ
(agent.qlog), whole or cut at its size limit. The controller fetches it with the trial's record
into the run's `events/` folder (data/README.md).

Written after the trial's measured window, so a trace costs the trial nothing it reports; its
cost is the tracing itself during the window (benchmarks/README.md, "Trace and measurement
overhead").
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import qlog
from agent.errors import UsageError
from agent.h2.trace import FrameEvent

SUFFIX = ".sqlog"


def trace_name(trial_id: str, role: str) -> str:
    """The trace's file name: `<trial_id>.<role>.sqlog` (role: client or server)."""
    return f"{trial_id}.{role}{SUFFIX}"


def write_trace(
    path: Path,
    events: Iterable[Mapping[str, object]],
    *,
    vantage_point: str,
    trial_id: str,
    reference_wall_ns: int,
    max_bytes: int,
) -> None:
    """`events` (`time` in ms after `reference_wall_ns`) as qlog at `path`, whole once it
    exists: written beside it, flushed to disk, renamed."""
    data = qlog.encode(
        vantage_point,
        f"h2iot trial {trial_id}",
        events,
        {
            "group_id": trial_id,
            "time_format": "relative",
            "reference_time": reference_wall_ns / 1e6,
        },
        max_bytes,
    )
    write_durably(path, data)


def write_durably(path: Path, data: bytes) -> None:
    """A trace's bytes at `path`, whole once it exists: written beside it, flushed to disk,
    renamed."""
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        partial.replace(path)
    except OSError as exc:
        raise UsageError(f"cannot write the event trace {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class TraceWriter:
    """A server's traces: each trial's events (its HTTP/2 frames, or qh3's QUIC events),
    written as the trial leaves its connection (before the trial's record), to `directory`. A
    trace it cannot write is reported on stderr and the server goes on serving: the trial's
    record does not depend on it."""

    directory: Path
    max_bytes: int = qlog.DEFAULT_MAX_BYTES

    def write(self, trial_id: str, events: Sequence[FrameEvent]) -> None:
        """HTTP/2 frame events (agent.h2.trace), the first frame the trace's reference."""
        start_ns = events[0].time_ns if events else time.monotonic_ns()
        # The wall clock the first frame had, read off now.
        wall_ns = time.time_ns() - (time.monotonic_ns() - start_ns)
        self.write_qlog(trial_id, [event.qlog(start_ns) for event in events], wall_ns)

    def write_wall_clock(self, trial_id: str, events: Sequence[Mapping[str, Any]]) -> None:
        """qlog events whose `time` is the wall clock in milliseconds (qh3's), made relative to
        the first."""
        start_ms = float(events[0]["time"]) if events else time.time_ns() / 1e6
        relative = [{**event, "time": event["time"] - start_ms} for event in events]
        self.write_qlog(trial_id, relative, round(start_ms * 1e6))

    def write_qlog(
        self, trial_id: str, events: Iterable[Mapping[str, object]], reference_wall_ns: int
    ) -> None:
        """qlog events, `time` in ms after `reference_wall_ns`."""
        try:
            write_trace(
                self.directory / trace_name(trial_id, "server"),
                events,
                vantage_point="server",
                trial_id=trial_id,
                reference_wall_ns=reference_wall_ns,
                max_bytes=self.max_bytes,
            )
        except UsageError as exc:
            print(json.dumps({"event": "trace_not_written", "error": str(exc)}), file=sys.stderr)


def cut_trace(path: Path, max_bytes: int) -> None:
    """A tool's trace at `path` (ngtcp2's qlog), as it wrote it, unless longer than
    `max_bytes`: then cut at a record (agent.qlog.cut). None written: nothing to cut."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot read the event trace {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        path.write_bytes(qlog.cut(data, max_bytes))
