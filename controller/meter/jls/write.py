"""What an import writes into the run (`controller.meter.jls.run`'s module doc): each trial's
trace, trials.csv whole with the meter's cells replaced, the manifest, an event."""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.columns import TRIALS
from controller.run.recorder import RunRecorder

__all__ = ["TrialTrace", "write_import"]


@dataclass(frozen=True)
class TrialTrace:
    """A trial's trace as the sweep saves it: seconds from its window's start, mW."""

    trial_id: str
    t_s: npt.NDArray[np.float64]
    power_mw: npt.NDArray[np.float64]


def write_import(
    run_dir: Path,
    manifest: Mapping[str, Any],
    *,
    rows: Sequence[Mapping[str, str]],
    traces: Sequence[TrialTrace],
    cells: Mapping[int, Mapping[str, object]],
    meter: Mapping[str, Any],
    idle_mw: float,
    idle_facts: Mapping[str, Any],
    recording_path: Path,
) -> None:
    """The traces first, then trials.csv whole (`cells`: the meter's cells by row index)
    through a rename, then the manifest, the earlier meter facts kept under
    `meter_import.replaced`."""
    recorder, _resumed = RunRecorder.resume(run_dir)
    try:
        for trace in traces:
            recorder.save_power(trace.trial_id, trace.t_s, trace.power_mw)
        recorder.write_file(TRIALS, _trials_csv(recorder.columns, rows, cells))
        earlier = manifest.get("meter_import")
        replaced = (
            earlier["replaced"]
            if isinstance(earlier, Mapping) and "replaced" in earlier
            else {
                key: manifest[key]
                for key in ("meter", "idle_baseline_mw", "idle_baseline", "idle_baseline_end")
                if key in manifest
            }
        )
        updated = {key: value for key, value in manifest.items() if key != "idle_baseline_end"}
        updated.update(
            meter=dict(meter),
            idle_baseline_mw=idle_mw,
            idle_baseline=dict(idle_facts),
            meter_import={
                "imported_wall_ns": time.time_ns(),
                "recording": str(recording_path.resolve()),
                "trials": len(traces),
                "replaced": replaced,
            },
        )
        recorder.write_manifest(updated)
        recorder.event(
            "meter_imported",
            recording=str(recording_path.resolve()),
            pulses=meter["pulses"],
            trials=len(traces),
            idle_mw=idle_mw if math.isfinite(idle_mw) else None,
        )
    finally:
        recorder.close()


def _trials_csv(
    columns: Sequence[str],
    rows: Sequence[Mapping[str, str]],
    cells: Mapping[int, Mapping[str, object]],
) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for index, row in enumerate(rows):
        merged: dict[str, object] = {**row, **cells.get(index, {})}
        writer.writerow(["" if merged.get(c) is None else merged.get(c) for c in columns])
    return buffer.getvalue().encode("utf-8")
