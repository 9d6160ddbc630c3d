"""Writing a trial's event trace on its node: `<dir>/<trial_id>.<role>.sqlog`, qlog in JSON-SEQ
(agent.qlog), whole or cut at its size limit. The controller fetches it with the trial's record
into the run's `events/` folder (data/README.md).

Written after the trial's measured window, so a trace costs the trial nothing it reports; its
cost is the tracing itself during the window (benchmarks/README.md, "Event traces").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from agent import qlog
from agent.errors import UsageError

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
