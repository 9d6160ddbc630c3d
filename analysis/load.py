"""Reads a run folder (format version 1) into a `Run`: its manifest and the ok rows of trials.csv.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.columns import (
    EVENTS,
    MANIFEST,
    NUMERIC_COLUMNS,
    POWER_DIR,
    REQUIRED_COLUMNS,
    TRIALS,
)
from analysis.errors import RunFormatError
from analysis.manifest import confidence_of, config_value, read_manifest

STATUSES = ("ok", "failed")


@dataclass(frozen=True, eq=False)
class Run:
    path: Path
    manifest: Mapping[str, Any]
    axes: tuple[str, ...]
    ok: pd.DataFrame  # ok rows, numeric columns as float, axes as int
    attempts: int  # rows in trials.csv, ok or not
    failed: pd.DataFrame = field(repr=False)  # trial_id, attempt, error of failed attempts
    torn_tail: bool = False

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def config(self) -> Mapping[str, Any]:
        config = self.manifest.get("config")
        return config if isinstance(config, Mapping) else {}

    @property
    def confidence(self) -> float:
        return confidence_of(self.manifest, self.path / MANIFEST)


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


def read_trials(path: Path, axes: tuple[str, ...]) -> tuple[pd.DataFrame, pd.DataFrame, int, bool]:
    """(ok rows, failed attempts, number of attempts, torn tail) of one trials.csv."""
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
    numeric = [c for c in NUMERIC_COLUMNS if c in header and c not in axes]
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
            parsed[axis] = _integer(row[axis], path, line, axis)
        for column in numeric:
            parsed[column] = _number(row[column], path, line, column)
        ok_rows.append(parsed)
    ok = pd.DataFrame(ok_rows, columns=header)
    if not ok.empty:
        ok = ok.astype({c: "float64" for c in numeric} | {a: "int64" for a in axes})
    failed = pd.DataFrame(failed_rows, columns=["trial_id", "attempt", "error"])
    return ok, failed, attempts, torn


def load_run(run_dir: Path) -> Run:
    """The run at `run_dir`; RunFormatError (one line naming the file) when it is malformed."""
    manifest = read_manifest(run_dir)
    axes = _axes(manifest, run_dir / MANIFEST)
    ok, failed, attempts, torn = read_trials(run_dir / TRIALS, axes)
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
