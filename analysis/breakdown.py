"""A breakdown search's result (`breakdown.csv`, data/README.md) as the report's tables.

The reference's table (issue 14) has a row per transport and a column per demanded rate, each
cell the payload at which the received rate fell 25 % below the demand; a search over two axes
is drawn the same way (rows: the first axis, columns: the second, both in the sweep's order),
each cell the breakdown with its bracket and the offered load in MB/s. A table of every group
follows with each bracket end's score interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.columns import BREAKDOWN
from analysis.document import Block, Heading, Paragraph, Table
from analysis.errors import RunFormatError


def read_breakdown(run_dir: Path, axes: Sequence[str]) -> pd.DataFrame | None:
    """The run's breakdown.csv (group axes as text), or None when the run was no search."""
    path = run_dir / BREAKDOWN
    if not path.exists():
        return None
    table = pd.read_csv(path, dtype={axis: str for axis in axes}, keep_default_na=False)
    missing = [c for c in (*axes, "status", "breakdown", "passing", "failing") if c not in table]
    if missing:
        raise RunFormatError(f"{path}: column {missing[0]}: missing from the header")
    return table


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _g(value: object) -> str:
    """Three significant digits, thousands as k and millions as M (the reference's ~400k)."""
    number = _number(value)
    if math.isnan(number):
        return "-"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(number) >= scale:
            return f"{number / scale:.3g}{suffix}"
    return f"{number:.3g}"


def cell_text(row: Mapping[str, Any], search: Mapping[str, Any]) -> str:
    """One group's breakdown as the reference's table writes it, with its bracket and MB/s."""
    status = row["status"]
    if status == "failed":
        return "failed"
    if status == "below_low":
        return f"< {_g(search.get('low'))}"
    if status == "above_high":
        return f"> {_g(search.get('high'))}"
    text = f"~{_g(row['breakdown'])} ({_g(row['passing'])}..{_g(row['failing'])})"
    mb_s = _number(row.get("mb_s"))
    return text if math.isnan(mb_s) else f"{text}, {mb_s:.3g} MB/s"


def _interval(row: Mapping[str, Any], end: str) -> str:
    mean = _number(row.get(f"{end}_mean"))
    if math.isnan(mean):
        return "-"
    low, high = _number(row.get(f"{end}_ci_low")), _number(row.get(f"{end}_ci_high"))
    return f"{mean:.3g} [{low:.3g}, {high:.3g}] n={row.get(f'{end}_n', '')}"


def _ordered(values: pd.Series, order: Sequence[object]) -> list[str]:
    """The distinct values in the sweep's order (as text), any others after them."""
    present = list(dict.fromkeys(str(v) for v in values))
    swept = [str(v) for v in order if str(v) in present]
    return swept + [v for v in present if v not in swept]


def grid_table(
    table: pd.DataFrame, axes: Sequence[str], sweep: Mapping[str, Any], search: Mapping[str, Any]
) -> Table:
    """The reference's layout: a row per value of the first axis, a column per the second's."""
    rows_axis, columns_axis = axes
    rows = _ordered(table[rows_axis], sweep.get(rows_axis, ()))
    columns = _ordered(table[columns_axis], sweep.get(columns_axis, ()))
    cells = {
        (str(row[rows_axis]), str(row[columns_axis])): cell_text(row, search)
        for _, row in table.iterrows()
    }
    body = tuple(
        (value, *(cells.get((value, column), "-") for column in columns)) for value in rows
    )
    return Table((rows_axis, *(f"{columns_axis} = {c}" for c in columns)), body)


def groups_table(table: pd.DataFrame, axes: Sequence[str], search: Mapping[str, Any]) -> Table:
    body = tuple(
        (
            *(str(row[axis]) for axis in axes),
            cell_text(row, search),
            _interval(row, "passing"),
            _interval(row, "failing"),
            str(row.get("probes", "")),
            str(row.get("forced_probes", "")),
            str(row.get("trials", "")),
        )
        for _, row in table.iterrows()
    )
    header = (
        *axes,
        "breakdown (bracket)",
        "score at passing [CI]",
        "score at failing [CI]",
        "probes",
        "forced",
        "trials",
    )
    return Table(header, body)


def breakdown_blocks(run_dir: Path, manifest: Mapping[str, Any]) -> list[Block]:
    """The report's breakdown section; none for a run that was no search."""
    config = manifest.get("config")
    config = config if isinstance(config, Mapping) else {}
    search = config.get("search")
    sweep = config.get("sweep")
    if not isinstance(search, Mapping) or not isinstance(sweep, Mapping):
        return []
    axes = [str(axis) for axis in sweep]
    table = read_breakdown(run_dir, axes)
    if table is None:
        return []
    scored = search.get("metric", "?")
    if search.get("relative_to"):
        scored = f"{scored} / {search['relative_to']}"
    holds = "at least" if search.get("holds", "at_least") == "at_least" else "at most"
    confidence = config.get("run", {}).get("confidence", 0.90)
    blocks: list[Block] = [
        Heading("Breakdown search"),
        Paragraph(
            f"Per group ({', '.join(axes)}): the {search.get('param')} at which {scored} stops "
            f"being {holds} {_g(search.get('threshold'))}, bisected over log {search.get('param')} "
            f"in [{_g(search.get('low'))}, {_g(search.get('high'))}] down to a ratio of "
            f"{search.get('resolution')}. Each probe ran {search.get('repetitions')} trials at a "
            f"time (at most {search.get('max_repetitions')}) until its {confidence * 100:g} % "
            "t-interval lay on one side of the threshold (else its mean decided: 'forced'). "
            "A cell: ~the bracket's geometric middle (last passing..first failing), and the "
            "offered load there in MB/s when the search knows the bytes per unit; '<' and '>' "
            "mark a breakdown outside the range searched (breakdown.csv)."
        ),
    ]
    if len(axes) == 2:
        blocks.append(grid_table(table, axes, sweep, search))
    blocks.append(groups_table(table, axes, search))
    return blocks
