"""Per swept point and metric: n, mean, sd, median, t-based CI, repetitions needed, outliers,
and for the energy metrics the meter's floor over the point's median trial (`meter_step_mj`,
`meter_noise_mj`, their sum `meter_floor_mj`; analysis.meter_floor): no other metric has one.

The result is one tidy table (a row per point and metric): the report's tables, figures and
checks, `summary.csv` and the notebook all read it. No value is ever dropped: empty cells are
counted as `missing`, values outside Tukey's fences (1.5 x IQR beyond the quartiles) are counted
as `outliers` and still enter every statistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.columns import (
    BYTES_RECEIVED,
    CONNECT_METRICS,
    FRAME_METRICS,
    FRAME_SOURCES,
    METRICS,
    PHASE_METRICS,
    PROCESS_METRICS,
    WINDOW_AXIS,
    Metric,
    metric_of,
)
from analysis.detectability import Resolvability, resolvability
from analysis.load import Run, workload_columns
from analysis.meter_floor import point_floor
from analysis.stats import Summary, repetitions_for_relative_half_width, summarize

DEFAULT_TARGET_RELATIVE_HALF_WIDTH = 0.05
TUKEY_K = 1.5

SUMMARY_COLUMNS = ("n", "mean", "sd", "ci_low", "ci_high", "confidence")
"""After `metric` and the swept settings: the columns summary.csv promises, in this order."""
EXTRA_COLUMNS = ("median", "relative_half_width", "reps_needed", "outliers", "missing")
FLOOR_COLUMNS = ("meter_step_mj", "meter_noise_mj", "meter_floor_mj")
ENERGY_METRICS = ("energy_mj", "energy_above_idle_mj")
"""The metrics a meter's step and noise bound: both integrate its power over a trial's window."""


def with_derived(ok: pd.DataFrame) -> pd.DataFrame:
    """The ok rows plus frames-per-byte columns where the run recorded frames and bytes."""
    table = ok.copy()
    if BYTES_RECEIVED not in table:
        return table
    received = table[BYTES_RECEIVED].where(table[BYTES_RECEIVED] > 0)
    for derived, source in FRAME_SOURCES.items():
        if source in table:
            table[derived] = table[source] / received
    return table


def tukey_outliers(values: Sequence[float] | np.ndarray) -> int:
    """How many values lie outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR]; 0 below 4 values."""
    data = np.asarray(values, dtype=np.float64)
    if data.size < 4:
        return 0
    q1, q3 = np.percentile(data, [25, 75])
    low, high = q1 - TUKEY_K * (q3 - q1), q3 + TUKEY_K * (q3 - q1)
    return int(np.count_nonzero((data < low) | (data > high)))


def plain(value: object) -> Any:
    """A numpy scalar as the Python value it holds (an axis value as the config wrote it)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def x_axis_of(table: pd.DataFrame, axes: Sequence[str]) -> str:
    """The axis figures put on x: the study's window when swept, else the first numeric axis,
    else the first; every other axis becomes one series per value."""
    if WINDOW_AXIS in axes:
        return WINDOW_AXIS
    numeric = [a for a in axes if a in table and pd.api.types.is_numeric_dtype(table[a])]
    return numeric[0] if numeric else axes[0]


def metrics_present(
    table: pd.DataFrame, workload_columns: Sequence[str] = ()
) -> tuple[Metric, ...]:
    """The report's metrics, the connection, phase, frame and process metrics this run has
    values for, and the workload's."""
    optional = (*CONNECT_METRICS, *PHASE_METRICS, *FRAME_METRICS, *PROCESS_METRICS)
    derived = tuple(m for m in optional if m.name in table and table[m.name].notna().any())
    own = tuple(metric_of(name) for name in workload_columns if name in table)
    return METRICS + derived + own


def summarize_points(
    run: Run, target_relative_half_width: float = DEFAULT_TARGET_RELATIVE_HALF_WIDTH
) -> pd.DataFrame:
    """One row per metric and swept point, metrics in report order, points sorted."""
    table = with_derived(run.ok)
    axes = list(run.axes)
    confidence = run.confidence
    rows: list[dict[str, object]] = []
    groups = {
        tuple(plain(v) for v in (key if isinstance(key, tuple) else (key,))): group
        for key, group in table.groupby(axes, sort=True)
    }
    floors = {point: point_floor(run.manifest, group) for point, group in groups.items()}
    for metric in metrics_present(table, workload_columns(run.manifest)):
        for point, group in groups.items():
            floor = floors[point] if metric.name in ENERGY_METRICS else None
            column = group[metric.name]
            values = column.dropna().to_numpy(dtype=np.float64)
            summary = summarize(values, confidence)
            mean = summary.mean
            relative = (
                summary.half_width / abs(mean)
                if summary.n >= 2 and mean != 0 and not math.isnan(mean)
                else math.nan
            )
            rows.append(
                {
                    "metric": metric.name,
                    **dict(zip(axes, point, strict=True)),
                    "n": summary.n,
                    "mean": mean,
                    "sd": summary.sd,
                    "ci_low": summary.ci_low,
                    "ci_high": summary.ci_high,
                    "confidence": confidence,
                    "median": summary.median,
                    "relative_half_width": relative,
                    "reps_needed": repetitions_for_relative_half_width(
                        summary, target_relative_half_width
                    ),
                    "outliers": tukey_outliers(values),
                    "missing": int(column.isna().sum()),
                    "meter_step_mj": math.nan if floor is None else floor.step_mj,
                    "meter_noise_mj": math.nan if floor is None else floor.noise_mj,
                    "meter_floor_mj": math.nan if floor is None else floor.total_mj,
                }
            )
    columns = ["metric", *axes, *SUMMARY_COLUMNS, *EXTRA_COLUMNS, *FLOOR_COLUMNS]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.astype({"reps_needed": "Int64"})


def metric_rows(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of one metric, in point order."""
    return summary[summary["metric"] == metric].reset_index(drop=True)


def summary_of(row: pd.Series) -> Summary:
    """A summary row's statistics as a `Summary` (n, mean and sd are what a difference needs;
    the others NaN where the row has none)."""
    rest = (float(row.get(key, math.nan)) for key in ("median", "ci_low", "ci_high", "confidence"))
    return Summary(int(row["n"]), float(row["mean"]), float(row["sd"]), *rest)


def floor_mj(*rows: pd.Series) -> float | None:
    """The larger of the rows' meter floors; None where none states one (not an energy metric,
    or a run whose manifest names no meter resolution)."""
    floors = [float(row.get("meter_floor_mj", math.nan)) for row in rows]
    known = [floor for floor in floors if math.isfinite(floor)]
    return max(known) if known else None


def row_resolvability(a: pd.Series, b: pd.Series, confidence: float | None = None) -> Resolvability:
    """Where b - a stands between two summary rows, at the rows' confidence unless given."""
    return resolvability(summary_of(a), summary_of(b), floor_mj(a, b), confidence)


SCALED_COLUMNS = ("mean", "sd", "median", "ci_low", "ci_high")
"""The summary columns in the metric's unit: what a change of unit divides."""


def divided(rows: pd.DataFrame, factor: float) -> pd.DataFrame:
    """Summary rows with every value in the metric's unit divided by factor."""
    return rows.assign(**{c: rows[c] / factor for c in SCALED_COLUMNS if c in rows})


def per_emulated_core(summary: pd.DataFrame, core_fractions: Mapping[str, float]) -> pd.DataFrame:
    """The summary with each emulated role's CPU % (`<role>_cpu_pct`, of its host's core) over
    its CPU quota (`core_fractions[role]`): the percent of its emulated core, which is what the
    study's Pi numbers compare with. Other rows unchanged."""
    scaled = summary.copy()
    for role, fraction in core_fractions.items():
        rows = scaled["metric"] == f"{role}_cpu_pct"
        scaled.loc[rows] = divided(scaled.loc[rows], fraction)
    return scaled
