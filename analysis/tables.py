"""The report's tables of numbers: one metric's statistics per point, and the study checks.

Values are shown in each metric's display unit to four significant digits; "-" marks a cell
without a value. Pure: summary rows (`analysis.points.summarize_points`) in, `Table` out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from analysis.columns import metric_of
from analysis.document import Table
from analysis.points import metric_rows, plain
from analysis.study import HIGH_WINDOW, LOW_WINDOW, Check


def number(value: float, scale: float = 1.0) -> str:
    """Four significant digits in the display unit; "-" where there is no value."""
    return "-" if pd.isna(value) else f"{value * scale:.4g}"


def percent_text(fraction: float) -> str:
    return "-" if math.isnan(fraction) else f"{fraction * 100:.1f}"


def value_text(value: object) -> str:
    """An axis value as the config wrote it (8192, 0.5, concurrent)."""
    value = plain(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def point_text(row: pd.Series, axes: Sequence[str]) -> str:
    return ", ".join(f"{axis} = {value_text(row[axis])}" for axis in axes)


def metric_table(summary: pd.DataFrame, axes: Sequence[str], metric: str, target: float) -> Table:
    info = metric_of(metric)
    rows = metric_rows(summary, metric)
    unit = f" ({info.display_unit})" if info.display_unit else ""
    header = (
        *axes,
        "n",
        f"mean{unit}",
        "sd",
        "median",
        "CI low",
        "CI high",
        "half-width %",
        f"reps for ±{target * 100:g} %",
        "outliers",
        "missing",
    )
    body = tuple(
        (
            *(value_text(row[a]) for a in axes),
            str(int(row["n"])),
            number(row["mean"], info.scale),
            number(row["sd"], info.scale),
            number(row["median"], info.scale),
            number(row["ci_low"], info.scale),
            number(row["ci_high"], info.scale),
            percent_text(row["relative_half_width"]),
            "-" if pd.isna(row["reps_needed"]) else str(int(row["reps_needed"])),
            str(int(row["outliers"])),
            str(int(row["missing"])),
        )
        for _, row in rows.iterrows()
    )
    return Table(header, body, f"{info.label} ({metric}, {info.unit or 'count'})")


def check_table(checks: Sequence[Check]) -> Table:
    """The findings, with whether the difference each compares is resolvable where any does."""
    with_series = any(c.series for c in checks)
    resolvable = any(c.resolvability is not None for c in checks)
    header = (
        "finding",
        *(("series",) if with_series else ()),
        "study",
        "this run",
        "verdict",
        *((f"{LOW_WINDOW} vs {HIGH_WINDOW} resolvable",) if resolvable else ()),
    )
    rows = tuple(
        (
            c.finding,
            *((c.series,) if with_series else ()),
            c.study,
            c.measured,
            c.verdict,
            *((c.resolvable or "-",) if resolvable else ()),
        )
        for c in checks
    )
    return Table(header, rows)
