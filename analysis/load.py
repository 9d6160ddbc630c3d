"""Reads a run folder (format 1 or 2) into a `Run`: its manifest and the ok rows of trials.csv.

Only `status == ok` rows are results; failed attempts are counted, never mixed in. A last line
without its newline (a kill in mid-write) is cut off and reported as `torn_tail`. Anything else
that does not fit the documented format raises `RunFormatError` with one line naming the file and
the key, line or column at fault.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.columns import EVENTS, MANIFEST, POWER_DIR, REQUIRED_COLUMNS, TRIALS
from analysis.errors import RunFormatError
from analysis.manifest import confidence_of, config_value, protocols_of, read_manifest
from analysis.qlog_counts import trace_counts
from analysis.trial_columns import NUMERIC_COLUMNS
from analysis.workloads import DEFAULT_KIND

STATUSES = ("ok", "failed")


AxisKind = Literal["int", "float", "category"]


@dataclass(frozen=True, eq=False)
class Run:
    path: Path
    manifest: Mapping[str, Any]
    axes: tuple[str, ...]
    ok: pd.DataFrame  # ok rows, numeric columns as float, axes as their kind says
    attempts: int  # rows in trials.csv, ok or not
    failed: pd.DataFrame = field(repr=False)  # trial_id, attempt, error of failed attempts
    torn_tail: bool = False

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def axis_kinds(self) -> dict[str, AxisKind]:
        return axis_kinds(self.manifest, self.axes)

    @property
    def numeric_axes(self) -> tuple[str, ...]:
        return tuple(a for a, kind in self.axis_kinds.items() if kind != "category")

    @property
    def workload(self) -> str:
        """The run's workload kind (runs before workloads existed fetched the page)."""
        workload = self.manifest.get("workload")
        kind = workload.get("kind") if isinstance(workload, Mapping) else None
        return kind if isinstance(kind, str) else DEFAULT_KIND

    @property
    def config(self) -> Mapping[str, Any]:
        config = self.manifest.get("config")
        return config if isinstance(config, Mapping) else {}

    @property
    def confidence(self) -> float:
        return confidence_of(self.manifest, self.path / MANIFEST)

    @property
    def protocols(self) -> tuple[str, ...]:
        return protocols_of(self.manifest)


def axis_kinds(manifest: Mapping[str, Any], axes: Sequence[str]) -> dict[str, AxisKind]:
    """Per axis: integers (every HTTP/2 setting), other numbers, or categories (strings and
    booleans), from the values the config swept (a breakdown search's parameter: its bounds);
    integers where the manifest does not say."""
    kinds: dict[str, AxisKind] = {}
    for axis in axes:
        values = config_value(manifest, f"sweep.{axis}")
        listed = values if isinstance(values, list) else []
        if not listed and config_value(manifest, "search.param") == axis:
            bounds = (config_value(manifest, "search.low"), config_value(manifest, "search.high"))
            listed = [bound for bound in bounds if bound is not None]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in listed):
            kinds[axis] = "int"
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in listed):
            kinds[axis] = "float"
        else:
            kinds[axis] = "category"
    return kinds


def workload_columns(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the columns the run's workload added (manifest `workload.columns`)."""
    workload = manifest.get("workload")
    columns = workload.get("columns") if isinstance(workload, Mapping) else None
    if not isinstance(columns, list):
        return ()
    return tuple(
        str(column["name"])
        for column in columns
        if isinstance(column, Mapping) and isinstance(column.get("name"), str)
    )


def _axes(manifest: Mapping[str, Any], path: Path) -> tuple[str, ...]:
    axes = manifest.get("axes")
    if axes is None:
        sweep = config_value(manifest, "sweep")
        if not isinstance(sweep, Mapping):
            raise RunFormatError(f"{path}: axes: missing (and no config.sweep to take it from)")
        axes = list(sweep)
    if not isinstance(axes, list) or not all(isinstance(a, str) and a for a in axes):
        raise RunFormatError(f"{path}: axes: expected a list of setting names, got {axes!r}")
    if len(set(axes)) != len(axes):
        raise RunFormatError(f"{path}: axes: names a setting twice ({axes!r})")
    return tuple(axes)


def _trial_lines(path: Path) -> tuple[str, bool]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RunFormatError(f"{path}: no such file (the run has no trial table)") from None
    torn = bool(data) and not data.endswith(b"\n")
    if torn:
        data = data[: data.rfind(b"\n") + 1]
    try:
        return data.decode("utf-8"), torn
    except UnicodeDecodeError as exc:
        raise RunFormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _number(text: str, path: Path, line: int, column: str) -> float:
    if text == "":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise RunFormatError(
            f"{path}: line {line}, column {column}: {text!r} is not a number"
        ) from None
    if math.isinf(value):
        raise RunFormatError(f"{path}: line {line}, column {column}: {text!r} is not finite")
    return value


def _integer(text: str, path: Path, line: int, column: str) -> int:
    value = _number(text, path, line, column)
    if math.isnan(value) or value != int(value):
        raise RunFormatError(
            f"{path}: line {line}, column {column}: {text!r} is not an integer setting"
        )
    return int(value)


def _axis_value(text: str, kind: AxisKind, path: Path, line: int, axis: str) -> object:
    if kind == "int":
        return _integer(text, path, line, axis)
    if kind == "float":
        return _number(text, path, line, axis)
    return text


def read_trials(
    path: Path,
    axes: tuple[str, ...],
    kinds: Mapping[str, AxisKind] | None = None,
    extra_numeric: Sequence[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame, int, bool]:
    """(ok rows, failed attempts, number of attempts, torn tail) of one trials.csv; `kinds`
    says how to read each axis (integers by default), `extra_numeric` names the workload's
    columns, read as numbers like the common metrics."""
    kinds = kinds or {}
    text, torn = _trial_lines(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise RunFormatError(f"{path}: empty (no header line)")
    missing = [c for c in (*REQUIRED_COLUMNS[:2], *axes, *REQUIRED_COLUMNS[2:]) if c not in header]
    if missing:
        raise RunFormatError(f"{path}: column {missing[0]}: missing from the header")
    if len(set(header)) != len(header):
        raise RunFormatError(f"{path}: header names a column twice")
    numeric = [c for c in (*NUMERIC_COLUMNS, *extra_numeric) if c in header and c not in axes]
    ok_rows: list[dict[str, Any]] = []
    failed_rows: list[dict[str, Any]] = []
    seen_ok: dict[str, int] = {}
    attempts = 0
    for fields in reader:
        line = reader.line_num
        if len(fields) != len(header):
            raise RunFormatError(
                f"{path}: line {line}: {len(fields)} fields where the header has {len(header)}"
            )
        row = dict(zip(header, fields, strict=True))
        attempts += 1
        status = row["status"]
        if status not in STATUSES:
            raise RunFormatError(
                f"{path}: line {line}, column status: {status!r} is not one of {STATUSES}"
            )
        if not row["trial_id"]:
            raise RunFormatError(f"{path}: line {line}, column trial_id: empty")
        if status == "failed":
            failed_rows.append(
                {
                    "trial_id": row["trial_id"],
                    "attempt": row.get("attempt", ""),
                    "error": row.get("error", ""),
                }
            )
            continue
        if row["trial_id"] in seen_ok:
            raise RunFormatError(
                f"{path}: line {line}, column trial_id: {row['trial_id']} already has an ok row "
                f"(line {seen_ok[row['trial_id']]})"
            )
        seen_ok[row["trial_id"]] = line
        parsed: dict[str, Any] = dict(row)
        for axis in axes:
            parsed[axis] = _axis_value(row[axis], kinds.get(axis, "int"), path, line, axis)
        for column in numeric:
            parsed[column] = _number(row[column], path, line, column)
        ok_rows.append(parsed)
    ok = pd.DataFrame(ok_rows, columns=header)
    if not ok.empty:
        types = {"int": "int64", "float": "float64", "category": "object"}
        ok = ok.astype(
            {c: "float64" for c in numeric} | {a: types[kinds.get(a, "int")] for a in axes}
        )
    failed = pd.DataFrame(failed_rows, columns=["trial_id", "attempt", "error"])
    return ok, failed, attempts, torn


def load_run(run_dir: Path) -> Run:
    """The run at `run_dir`; RunFormatError (one line naming the file) when it is malformed."""
    manifest = read_manifest(run_dir)
    axes = _axes(manifest, run_dir / MANIFEST)
    ok, failed, attempts, torn = read_trials(
        run_dir / TRIALS, axes, axis_kinds(manifest, axes), workload_columns(manifest)
    )
    # Counted from the traces at each load, not stored: a trace read by a later version of
    # this reader (a class it learnt to count) gives the run its counts.
    counts = trace_counts(run_dir, list(ok["trial_id"]))
    if counts:
        ok = ok.assign(**{column: np.array(values) for column, values in counts.items()})
    return Run(run_dir, manifest, axes, ok, attempts, failed, torn)


def require_results(run: Run) -> None:
    """A report needs at least one ok row."""
    if run.ok.empty:
        raise RunFormatError(
            f"{run.path / TRIALS}: no ok rows ({run.attempts} attempts recorded, none succeeded)"
        )


def load_power(run: Run, trial_id: str) -> npt.NDArray[np.float64] | None:
    """The (n, 2) trace of seconds and mW for a trial, or None when the run saved none."""
    path = run.path / POWER_DIR / f"{trial_id}.npy"
    if not path.exists():
        return None
    try:
        trace = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise RunFormatError(f"{path}: not a readable .npy array ({exc})") from None
    if trace.ndim != 2 or trace.shape[1] != 2 or not np.issubdtype(trace.dtype, np.floating):
        raise RunFormatError(
            f"{path}: expected a float (n, 2) array of seconds and mW, "
            f"got {trace.dtype} {trace.shape}"
        )
    return np.asarray(trace, dtype=np.float64)


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """events.jsonl as records; a torn last line is skipped, a bad line elsewhere is an error."""
    path = run_dir / EVENTS
    if not path.exists():
        return []
    text, _torn = _trial_lines(path)
    events: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RunFormatError(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("event"), str):
            raise RunFormatError(f"{path}: line {number}: expected an object with an event key")
        events.append(record)
    return events
