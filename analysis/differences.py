"""The differences a report states, against what the run and its meter can see
(`analysis.detectability`): from summary rows (`analysis.points.summarize_points`), whose energy
rows carry each point's meter floor.

A difference between two points is bounded by the larger of their floors: either reading may be
off by its own. The report's own comparisons are those its figures draw, each pair of points
that differ in one swept setting and are neighbours along it; the report's "Meter floor" section
lists them for the energy metrics, and the first screen counts those no repetition resolves.

`compare_summaries` sets two summaries' points against each other (two runs, analysis.compare;
two series of one run, analysis.categories): the Welch difference per metric and point with its
resolvability; `interval_text` is how tables show a mean or a difference with its interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from analysis.columns import metric_of
from analysis.detectability import Resolvability
from analysis.document import Block, Heading, Paragraph, Table
from analysis.points import ENERGY_METRICS, metric_rows, row_resolvability, summary_of
from analysis.stats import welch_difference
from analysis.tables import number, point_text, value_text

__all__ = [
    "compare_summaries",
    "floor_blocks",
    "floor_caveats",
    "interval_text",
    "neighbour_differences",
]


def neighbour_differences(
    summary: pd.DataFrame, axes: Sequence[str], metric: str
) -> list[tuple[pd.Series, pd.Series, Resolvability]]:
    """(a, b, b - a's resolvability) for each pair of the metric's points that differ in one
    setting and are neighbours along it (in its sorted values), axis by axis."""
    rows = metric_rows(summary, metric)
    rows = rows[rows["n"] > 0]
    pairs = []
    for axis in axes:
        others = [other for other in axes if other != axis]
        groups = [rows] if not others else [g for _, g in rows.groupby(others, sort=True)]
        for group in groups:
            ordered = group.sort_values(axis)
            for (_, a), (_, b) in zip(
                ordered.iloc[:-1].iterrows(), ordered.iloc[1:].iterrows(), strict=True
            ):
                pairs.append((a, b, row_resolvability(a, b)))
    return pairs


def _below(summary: pd.DataFrame, axes: Sequence[str], metric: str) -> tuple[int, int, float]:
    """(differences below the floor, differences, the largest floor among them)."""
    pairs = neighbour_differences(summary, axes, metric)
    below = [r for _a, _b, r in pairs if r.verdict == "below_meter_floor"]
    largest = max((r.floor_mj or 0.0 for r in below), default=0.0)
    return len(below), len(pairs), largest


def floor_caveats(summary: pd.DataFrame, axes: Sequence[str]) -> list[str]:
    """A line per energy metric whose neighbouring points differ by less than the meter's floor:
    those comparisons are the meter's, whatever n."""
    lines = []
    for metric in ENERGY_METRICS:
        below, pairs, largest = _below(summary, axes, metric)
        if below:
            lines.append(
                f"{below} of {pairs} {metric} differences between neighbouring points are below "
                f"the meter's floor (up to {largest:.3g} mJ): the meter cannot tell those points "
                "apart, whatever the repetitions (Meter floor)."
            )
    return lines


def _difference_text(a: pd.Series, b: pd.Series, axes: Sequence[str]) -> str:
    changed = [axis for axis in axes if a[axis] != b[axis]]
    same = [axis for axis in axes if axis not in changed]
    moved = ", ".join(f"{x} {value_text(a[x])} -> {value_text(b[x])}" for x in changed)
    return moved + (f" ({point_text(a, same)})" if same else "")


def floor_blocks(summary: pd.DataFrame, axes: Sequence[str]) -> list[Block]:
    """The meter floor per point (client energy) and each energy difference between
    neighbouring points against it and against this run's n."""
    rows = metric_rows(summary, ENERGY_METRICS[0])
    if rows.empty or "meter_floor_mj" not in rows or rows["meter_floor_mj"].isna().all():
        return [
            Heading("Meter floor"),
            Paragraph(
                "Not known: the manifest names no meter resolution (a run recorded before "
                "meters stated theirs), so no difference here can be set against the meter."
            ),
        ]
    blocks: list[Block] = [
        Heading("Meter floor"),
        Paragraph(
            "Per point, what one step of the meter held over the median trial's window and the "
            "meter's noise averaged over its samples amount to in energy (summary.csv's "
            "meter_step_mj, meter_noise_mj and their sum meter_floor_mj). An energy difference "
            "within the larger floor of its two points is the meter's: repetitions average the "
            "noise but not a step held for a whole trial, so no n resolves it. Above the floor, "
            "a difference needs this run's minimum detectable difference (a two-sided Welch "
            "test at the run's confidence and 80 % power, from the observed spread and n), or "
            "the repetitions stated."
        ),
        Table(
            (*axes, "step (mJ)", "noise (mJ)", "floor (mJ)", "energy (mJ)"),
            tuple(
                (
                    *(value_text(row[a]) for a in axes),
                    number(row["meter_step_mj"]),
                    number(row["meter_noise_mj"]),
                    number(row["meter_floor_mj"]),
                    number(row["mean"]),
                )
                for _, row in rows.iterrows()
            ),
            "The meter's floor over each point's median trial",
        ),
    ]
    for metric in ENERGY_METRICS:
        pairs = neighbour_differences(summary, axes, metric)
        if pairs:
            blocks.append(
                Table(
                    ("points", "difference (mJ)", "resolvable"),
                    tuple(
                        (_difference_text(a, b, axes), number(r.difference), r.text())
                        for a, b, r in pairs
                    ),
                    f"{metric}: each difference between neighbouring points",
                )
            )
    return blocks


def compare_summaries(
    base_summary: pd.DataFrame,
    other_summary: pd.DataFrame,
    axes: Sequence[str],
    confidence: float,
) -> pd.DataFrame:
    """One row per metric and point present in both runs (points in one run only are dropped
    here and listed by `unmatched_points`)."""
    keys = ["metric", *axes]
    merged = base_summary.merge(other_summary, on=keys, suffixes=("_base", "_other"))
    rows: list[dict[str, Any]] = []
    for _, row in merged.iterrows():
        base_row = row.rename(lambda c: c.removesuffix("_base"))
        other_row = row.rename(lambda c: c.removesuffix("_other"))
        base, other = summary_of(base_row), summary_of(other_row)
        difference = welch_difference(base, other, confidence)
        resolvable = row_resolvability(base_row, other_row, confidence)
        rows.append(
            {
                **{key: row[key] for key in keys},
                "n_base": base.n,
                "mean_base": base.mean,
                "ci_low_base": base.ci_low,
                "ci_high_base": base.ci_high,
                "n_other": other.n,
                "mean_other": other.mean,
                "ci_low_other": other.ci_low,
                "ci_high_other": other.ci_high,
                "difference": difference.estimate,
                "difference_ci_low": difference.ci_low,
                "difference_ci_high": difference.ci_high,
                "relative": other.mean / base.mean - 1 if base.mean != 0 else math.nan,
                "differs": difference.excludes_zero,
                "confidence": confidence,
                "min_detectable": resolvable.min_detectable,
                "meter_floor_mj": math.nan if resolvable.floor_mj is None else resolvable.floor_mj,
                "resolvability": resolvable.verdict,
                "repetitions_needed": resolvable.repetitions,
                "resolvable": resolvable.text(metric_of(row["metric"]).unit),
            }
        )
    return pd.DataFrame(rows).astype({"repetitions_needed": "Int64"}, errors="ignore")


def interval_text(mean: float, low: float, high: float, scale: float) -> str:
    """A mean and its interval as tables show them, "mean [low, high]" (the mean alone when
    there is no interval), in the column's scale."""
    if math.isnan(low):
        return number(mean, scale)
    return f"{number(mean, scale)} [{number(low, scale)}, {number(high, scale)}]"
