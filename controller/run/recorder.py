"""Writes a run directory so that nothing completed is ever lost or rewritten.

- `trials.csv` is append-only: one row per attempt, flushed and fsynced before the next trial
  starts, so a SIGKILL loses at most the trial in flight. A torn last line (killed mid-write) is
  cut off when the run is resumed.
- `events.jsonl` is append-only too; `manifest.json` is written whole through a rename.
- `power/<trial_id>.npy` holds a (n, 2) float64 array: seconds since the window start, mW.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.columns import EVENTS, FORMAT_VERSION, MANIFEST, POWER_DIR, TRIALS
from analysis.errors import RunFormatError
from analysis.manifest import read_manifest
from controller.errors import ConfigError
from controller.run.columns import header


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


class RunRecorder:
    """One run directory, new or resumed. Not thread-safe: the sweep engine owns it."""

    def __init__(self, run_dir: Path, axes: tuple[str, ...], workload: str = "page") -> None:
        self.run_dir = run_dir
        self.axes = axes
        self.workload = workload
        self.columns = header(axes, workload)
        (run_dir / POWER_DIR).mkdir(parents=True, exist_ok=True)
        self._trials = self._open_trials()
        self._events = (run_dir / EVENTS).open("a", encoding="utf-8")

    @classmethod
    def create(
        cls,
        run_dir: Path,
        axes: tuple[str, ...],
        manifest: Mapping[str, Any],
        workload: str = "page",
    ) -> RunRecorder:
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ConfigError(f"{run_dir}: run directory exists and is not empty (use --resume)")
        run_dir.mkdir(parents=True, exist_ok=True)
        document = {"format_version": FORMAT_VERSION, **manifest}
        _write_atomically(run_dir / MANIFEST, json.dumps(document, indent=2, default=str) + "\n")
        return cls(run_dir, axes, workload)

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Complete the manifest once the nodes and meter are known (whole, through a rename)."""
        document = {"format_version": FORMAT_VERSION, **manifest}
        _write_atomically(
            self.run_dir / MANIFEST, json.dumps(document, indent=2, default=str) + "\n"
        )

    @classmethod
    def resume(cls, run_dir: Path) -> tuple[RunRecorder, dict[str, Any]]:
        manifest = manifest_to_resume(run_dir)
        axes = tuple(manifest.get("axes", ()))
        workload = manifest.get("workload", {}).get("kind", "page")
        return cls(run_dir, axes, workload), manifest

    def _open_trials(self) -> io.TextIOWrapper:
        path = self.run_dir / TRIALS
        if path.exists():
            _cut_torn_tail(path)
            with path.open(encoding="utf-8", newline="") as handle:
                existing = next(csv.reader(handle), None)
            if existing is not None and existing != self.columns:
                raise ConfigError(
                    f"{path}: header does not match this run's columns (a run recorded by "
                    "another version of h2iot is resumed by that version)"
                )
            handle_out = path.open("a", encoding="utf-8", newline="")
            if existing is None:
                self._write_row(handle_out, self.columns)
            return handle_out
        handle_out = path.open("a", encoding="utf-8", newline="")
        self._write_row(handle_out, self.columns)
        return handle_out

    @staticmethod
    def _write_row(handle: io.TextIOWrapper, values: Sequence[object]) -> None:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(values)
        handle.write(buffer.getvalue())
        handle.flush()
        os.fsync(handle.fileno())

    def append_trial(self, row: Mapping[str, object]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise ValueError(f"not trials.csv columns: {sorted(unknown)}")
        self._write_row(
            self._trials, ["" if row.get(c) is None else row.get(c) for c in self.columns]
        )

    def event(self, kind: str, **fields: object) -> None:
        record = {"t_wall_ns": time.time_ns(), "event": kind, **fields}
        self._events.write(json.dumps(record, default=str) + "\n")
        self._events.flush()

    def save_power(
        self, trial_id: str, t_s: npt.NDArray[np.float64], power_mw: npt.NDArray[np.float64]
    ) -> None:
        trace = np.column_stack((t_s, power_mw)).astype(np.float64)
        path = self.run_dir / POWER_DIR / f"{trial_id}.npy"
        partial = path.with_suffix(".partial.npy")
        np.save(partial, trace)
        os.replace(partial, path)

    def rows(self) -> list[dict[str, str]]:
        return read_trials(self.run_dir)

    def close(self) -> None:
        self._trials.close()
        self._events.close()


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line that was cut short by a kill (no trailing newline)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        with path.open("r+b") as handle:
            handle.truncate(keep)


def manifest_to_resume(run_dir: Path) -> dict[str, Any]:
    """The manifest of the run to resume, read by the analysis' one reader of the run format.
    The run directory came from the user (`--resume`), so a malformed one is a ConfigError."""
    try:
        return read_manifest(run_dir)
    except RunFormatError as exc:
        raise ConfigError(str(exc)) from exc


def read_trials(run_dir: Path) -> list[dict[str, str]]:
    path = run_dir / TRIALS
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        return [row for row in csv.DictReader(handle) if row.get("trial_id")]
