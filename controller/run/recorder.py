"""Writes a run directory so that nothing completed is ever lost or rewritten.

- `power/<trial_id>.npy` holds a (n, 2) float64 array: seconds since the window start, mW. It is
  written to a temporary file, fsynced, renamed into place and the directory fsynced, all
  before the trial's row: an ok row always has its trace, and a trace is never half-written.
- `trials.csv` is append-only: one row per attempt, fsynced before the next trial starts, so a
  SIGKILL loses at most the trial in flight. A torn last line (killed mid-write) is cut off when
  the run is resumed; a row whose write fails (a full disk) is cut back at once.
- `events.jsonl` is append-only too; `manifest.json` is written whole through a rename.
- A write that fails raises `RunWriteError` (`RunDiskFull` for a full disk), one line naming
  the run directory, and leaves the run as it stood before the write.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from agent.event_trace import trace_name
from agent.protocols import PROTOCOLS, protocol_spec
from agent.workloads import DEFAULT_KIND
from analysis.columns import EVENTS, EVENTS_DIR, FORMAT_VERSION, MANIFEST, POWER_DIR, TRIALS
from analysis.errors import RunFormatError
from analysis.manifest import protocols_of, read_manifest
from analysis.trial_columns import header
from controller.errors import ConfigError
from controller.run.errors import disk_full, write_error

PARTIAL = ".partial"
"""The suffix of a file being written; a kill can leave one, which resuming removes."""

RESERVE_BYTES = 1 << 20
"""Below this much free space the run's disk counts as full: no trial starts that could not
be recorded (its agents' logs and the meter's ground truth share the disk)."""


def _fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (the new name is in the directory's own data)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(run_dir: Path, path: Path, data: bytes) -> None:
    """`path` holds `data` whole, or what it held before: temp file, fsync, rename, fsync dir."""
    partial = path.with_name(path.name + PARTIAL)
    try:
        with partial.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise write_error(run_dir, path, exc) from None


def _manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    document = {"format_version": FORMAT_VERSION, **manifest}
    return (json.dumps(document, indent=2, default=str) + "\n").encode()


class RunRecorder:
    """One run directory, new or resumed. Not thread-safe: the sweep engine owns it."""

    def __init__(
        self,
        run_dir: Path,
        axes: tuple[str, ...],
        workload: str = DEFAULT_KIND,
        search: bool = False,
        quic: bool = False,
        *,
        bench: str | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.axes = axes
        self.workload = workload
        self.bench = bench  # a shared study's bench: every row names it
        self.columns = header(axes, workload, search, quic, bench=bench is not None)
        power = run_dir / POWER_DIR
        try:
            power.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(run_dir, power, exc) from None
        events = run_dir / EVENTS_DIR
        for leftover in (
            *power.glob(f"*{PARTIAL}"),
            *events.glob(f"*{PARTIAL}"),
            *run_dir.glob(f"*{PARTIAL}"),
        ):
            leftover.unlink(missing_ok=True)
        self._trials = self._open_trials()
        self._events = os.open(run_dir / EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @classmethod
    def create(
        cls,
        run_dir: Path,
        axes: tuple[str, ...],
        manifest: Mapping[str, Any],
        workload: str = DEFAULT_KIND,
        search: bool = False,
        *,
        quic: bool = False,
        bench: str | None = None,
    ) -> RunRecorder:
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ConfigError(f"{run_dir}: run directory exists and is not empty (use --resume)")
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(run_dir, run_dir, exc) from None
        _write_atomically(run_dir, run_dir / MANIFEST, _manifest_bytes(manifest))
        return cls(run_dir, axes, workload, search, quic, bench=bench)

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Replace the manifest whole, through a rename (facts learnt once the nodes, the meter
        and the idle baseline are known)."""
        _write_atomically(self.run_dir, self.run_dir / MANIFEST, _manifest_bytes(manifest))

    @classmethod
    def resume(cls, run_dir: Path) -> tuple[RunRecorder, dict[str, Any]]:
        manifest = manifest_to_resume(run_dir)
        axes = tuple(manifest.get("axes", ()))
        workload = manifest.get("workload", {}).get("kind", DEFAULT_KIND)
        search = manifest.get("config", {}).get("search") is not None
        quic = any(p in PROTOCOLS and protocol_spec(p).quic for p in protocols_of(manifest))
        study = manifest.get("study")
        bench = study.get("bench") if isinstance(study, dict) else None
        return cls(run_dir, axes, workload, search, quic, bench=bench), manifest

    def _open_trials(self) -> int:
        path = self.run_dir / TRIALS
        existing = None
        if path.exists():
            _cut_torn_tail(path)
            with path.open(encoding="utf-8", newline="") as handle:
                existing = next(csv.reader(handle), None)
            if existing is not None and existing != self.columns:
                raise ConfigError(
                    f"{path}: header does not match this run's columns (a run recorded by "
                    "another version of h2iot is resumed by that version)"
                )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise write_error(self.run_dir, path, exc) from None
        if existing is None:
            self._append(fd, path, _csv_line(self.columns), sync=True)
        return fd

    def _append(self, fd: int, path: Path, data: bytes, *, sync: bool) -> None:
        """Append `data` whole or not at all: a failed write is cut back off the file."""
        end = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, end)
            raise write_error(self.run_dir, path, exc) from None

    def append_trial(self, row: Mapping[str, object]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise ValueError(f"not trials.csv columns: {sorted(unknown)}")
        values = ["" if row.get(c) is None else row.get(c) for c in self.columns]
        self._append(self._trials, self.run_dir / TRIALS, _csv_line(values), sync=True)

    def event(self, kind: str, **fields: object) -> None:
        record = {"t_wall_ns": time.time_ns(), "event": kind, **fields}
        line = (json.dumps(record, default=str) + "\n").encode()
        self._append(self._events, self.run_dir / EVENTS, line, sync=False)

    def write_file(self, name: str, data: bytes) -> None:
        """A derived file of the run (a breakdown search's breakdown.csv), replaced whole."""
        _write_atomically(self.run_dir, self.run_dir / name, data)

    def save_power(
        self, trial_id: str, t_s: npt.NDArray[np.float64], power_mw: npt.NDArray[np.float64]
    ) -> None:
        """The trial's trace, durable before its row is written (see the module doc)."""
        trace = np.column_stack((t_s, power_mw)).astype(np.float64)
        buffer = io.BytesIO()
        np.save(buffer, trace, allow_pickle=False)
        path = self.run_dir / POWER_DIR / f"{trial_id}.npy"
        _write_atomically(self.run_dir, path, buffer.getvalue())

    def save_events(self, trial_id: str, role: str, data: bytes) -> None:
        """A role's event trace of the trial, durable before its row, as its power trace."""
        events = self.run_dir / EVENTS_DIR
        try:
            events.mkdir(exist_ok=True)
        except OSError as exc:
            raise write_error(self.run_dir, events, exc) from None
        _write_atomically(self.run_dir, events / trace_name(trial_id, role), data)

    def check_space(self) -> None:
        """RunDiskFull when the run's disk has less than RESERVE_BYTES free."""
        free = shutil.disk_usage(self.run_dir).free
        if free < RESERVE_BYTES:
            raise disk_full(self.run_dir, self.run_dir, f"{free} bytes free before the next trial")

    def ok_without_trace(self) -> list[str]:
        """Trials with an ok row but no power trace (runs recorded before the trace was written
        first, or a trace deleted since): flagged on resume and counted by the report."""
        power = self.run_dir / POWER_DIR
        ok = dict.fromkeys(row["trial_id"] for row in self.rows() if row["status"] == "ok")
        return [trial for trial in ok if not (power / f"{trial}.npy").exists()]

    def rows(self) -> list[dict[str, str]]:
        return read_trials(self.run_dir)

    def close(self) -> None:
        os.close(self._trials)
        os.close(self._events)


def _csv_line(values: Sequence[object]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue().encode("utf-8")


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
