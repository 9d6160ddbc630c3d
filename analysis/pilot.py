"""A pilot run as a plan reads it (`analysis.plan`): its ok trials, each with what it cost in
time, start to start.

A trial's cost is more than its window: the server restarting for new settings, the agents
starting, the trace being written. The pilot shows all of it as the time from a trial's start to
the next one's (events.jsonl's `trial_started`, the controller's clock), a retried trial's
attempts together; the run's last trial, and one followed by a pause, have none. A run with no
`trial_started` events (recorded by an older h2iot) is timed from its rows' fetch starts
instead, the client's clock, in the order the trials ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from analysis.load import load_run, read_events, require_results

__all__ = ["TRIAL_S", "Pilot", "read_pilot", "start_to_start_s"]

TRIAL_S = "trial_s"
"""The column a pilot's rows gain: seconds from the trial's start to the next trial's (NaN: not
known)."""

TimedBy = Literal["events", "row timestamps", "nothing"]

# Events after which the next trial's start is no measure of the previous trial's cost.
_BREAKS = frozenset({"sweep_paused", "sweep_resumed"})


@dataclass(frozen=True, eq=False)
class Pilot:
    path: Path
    axes: tuple[str, ...]
    rows: pd.DataFrame  # the ok rows, with TRIAL_S
    config: Mapping[str, Any]  # the manifest's config: what the pilot ran
    timed_by: TimedBy


def start_to_start_s(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per trial id, seconds from its first attempt's start to the next trial's start, from the
    run's events in the order they were written."""
    seconds: dict[str, float] = {}
    previous: tuple[str, int] | None = None  # the trial started last, and when
    for event in events:
        kind = event.get("event")
        if kind in _BREAKS:
            previous = None
        elif kind == "trial_started":
            trial_id, t_ns = str(event.get("trial_id")), int(event.get("t_wall_ns", 0))
            if previous is not None:
                seconds[previous[0]] = seconds.get(previous[0], 0.0) + (t_ns - previous[1]) / 1e9
            previous = (trial_id, t_ns)
    return seconds


def _from_rows(rows: pd.DataFrame) -> dict[str, float]:
    """Start to start from the rows' fetch starts, in run order; gaps that are not positive
    (a run recorded with one timestamp for every trial) say nothing."""
    if rows.empty or "t_wall_start_ns" not in rows:
        return {}
    ordered = rows.assign(_start=pd.to_numeric(rows["t_wall_start_ns"], errors="coerce"))
    ordered = ordered.dropna(subset=["_start"]).sort_values("_start")
    gaps = np.diff(ordered["_start"].to_numpy(dtype=np.float64)) / 1e9
    ids = ordered["trial_id"].to_list()
    return {trial_id: float(gap) for trial_id, gap in zip(ids[:-1], gaps, strict=True) if gap > 0}


def read_pilot(run_dir: Path) -> Pilot:
    """The pilot at `run_dir`; `RunFormatError` (one line naming the file) when it is not a run
    folder or has no ok trial."""
    run = load_run(run_dir)
    require_results(run)
    timed_by: TimedBy = "events"
    seconds = start_to_start_s(read_events(run_dir))
    if not seconds:
        seconds, timed_by = _from_rows(run.ok), "row timestamps"
    if not seconds:
        timed_by = "nothing"
    rows = run.ok.assign(**{TRIAL_S: run.ok["trial_id"].map(seconds).astype("float64")})
    return Pilot(run.path, run.axes, rows, run.config, timed_by)
