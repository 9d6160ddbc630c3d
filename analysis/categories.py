"""The comparison a run sweeping a category axis was made for (issue 36): per point of the other
axes, each series against the reference series, in energy (total and above idle), client and
server CPU time and response time, each difference with its Welch interval and whether the run
could resolve it (analysis.differences.compare_summaries). Its table opens the findings.

A category axis is one whose swept values are not numbers (analysis.load.axis_kinds): the
protocol, a connection policy, an encoding, a transport. Its reference series is the one the
axis declares, else the first value the config lists. The protocol axis declares HTTP/2: over
TLS (h2) where the run has it, as HTTP/3 always encrypts and is compared with h2, not h2c
(configs/h3.toml); else the cleartext h2c.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from agent.protocols import protocols_where
from analysis.columns import metric_of
from analysis.differences import compare_summaries, interval_text
from analysis.document import Block, Heading, Paragraph, Table
from analysis.load import Run
from analysis.manifest import config_value
from analysis.points import plain
from analysis.tables import number, value_text
from analysis.trial_columns import PROTOCOL_COLUMN

__all__ = [
    "COMPARED_METRICS",
    "category_axes",
    "category_blocks",
    "category_differences",
    "difference_table",
    "reference_of",
    "series_of",
]

COMPARED_METRICS = (
    "energy_mj",
    "energy_above_idle_mj",
    "client_cpu_s",
    "server_cpu_s",
    "client_response_s",
)

# HTTP/2 over TLS first: the fair reference for HTTP/3, which always encrypts.
_PROTOCOL_REFERENCES = (
    *protocols_where(quic=False, tls=True),
    *protocols_where(quic=False, tls=False),
)


def category_axes(run: Run) -> tuple[str, ...]:
    return tuple(axis for axis, kind in run.axis_kinds.items() if kind == "category")


def series_of(run: Run, axis: str) -> tuple[str, ...]:
    """The axis's values among the run's ok rows, in the config's order (the rows hold a
    category as text; a value the config does not list goes last)."""
    listed = config_value(run.manifest, f"sweep.{axis}")
    order = [str(value) for value in listed] if isinstance(listed, list) else []
    present = {str(plain(value)) for value in run.ok[axis].dropna()}
    return tuple(sorted(present, key=lambda v: (order.index(v) if v in order else len(order), v)))


def reference_of(axis: str, series: Sequence[str]) -> str:
    """The series the others are compared with (module doc)."""
    if axis == PROTOCOL_COLUMN.name:
        declared = next((p for p in _PROTOCOL_REFERENCES if p in series), None)
        if declared is not None:
            return declared
    return series[0]


def _why(axis: str, reference: str) -> str:
    if axis == PROTOCOL_COLUMN.name and reference in _PROTOCOL_REFERENCES:
        return (
            f"{reference} is the reference: the run's HTTP/2, over TLS where it has it, as "
            "HTTP/3 always encrypts"
        )
    return f"{reference} is the reference: the first {axis} the config lists"


def category_differences(
    summary: pd.DataFrame,
    axes: Sequence[str],
    axis: str,
    run: Run,
    metrics: Sequence[str] = COMPARED_METRICS,
) -> pd.DataFrame:
    """compare_summaries of each series against the reference, the series named in `axis`,
    for each of `metrics` (COMPARED_METRICS unless a workload compares its own)."""
    series = series_of(run, axis)
    reference = reference_of(axis, series)
    others = [a for a in axes if a != axis]
    rows = summary[summary["metric"].isin(metrics)]
    as_text = rows[axis].map(lambda value: str(plain(value)))

    def side(value: str) -> pd.DataFrame:
        return rows[as_text == value].drop(columns=axis)

    tables = [
        compare_summaries(side(reference), side(value), others, run.confidence).assign(
            **{axis: value}
        )
        for value in series
        if value != reference
    ]
    tables = [table for table in tables if not table.empty]
    if not tables:
        return pd.DataFrame()
    table = pd.concat(tables, ignore_index=True)
    order = {metric: index for index, metric in enumerate(metrics)}
    return table.sort_values(
        ["metric", *others, axis], key=lambda c: c.map(order) if c.name == "metric" else c
    )


def difference_table(
    differences: pd.DataFrame, axes: Sequence[str], axis: str, reference: str
) -> Table:
    """category_differences' rows as the report shows them: each point's reference and other mean,
    their difference with its Welch interval, relative, and whether the run resolves it."""
    others = [a for a in axes if a != axis]
    compared = list(dict.fromkeys(differences[axis]))
    level = f"{differences['confidence'].iloc[0] * 100:g} %"
    # One series against the reference names both in the header; several need their own column.
    single = compared[0] if len(compared) == 1 else None
    header = (
        "metric",
        *others,
        *(() if single else (axis,)),
        f"{reference} (reference)",
        single or "mean",
        f"{single or axis} - {reference} [{level} Welch CI]",
        "relative",
        "resolvable",
    )
    body = []
    for _, row in differences.iterrows():
        info = metric_of(row["metric"])
        low, high = row["difference_ci_low"], row["difference_ci_high"]
        body.append(
            (
                f"{info.label} ({info.display_unit})",
                *(value_text(row[a]) for a in others),
                *(() if single else (str(row[axis]),)),
                number(row["mean_base"], info.scale),
                number(row["mean_other"], info.scale),
                interval_text(row["difference"], low, high, info.scale),
                "-" if pd.isna(row["relative"]) else f"{row['relative'] * 100:+.1f} %",
                row["resolvable"],
            )
        )
    return Table(header, tuple(body), f"{' and '.join(compared)} against {reference}, per point")


def category_blocks(run: Run, summary: pd.DataFrame) -> list[Block]:
    """Per category axis of two series or more: a heading, how to read it, the table."""
    blocks: list[Block] = []
    for axis in category_axes(run):
        series = series_of(run, axis)
        if len(series) < 2:
            continue
        reference = reference_of(axis, series)
        differences = category_differences(summary, run.axes, axis, run)
        if differences.empty:
            continue
        compared = " and ".join(value for value in series if value != reference)
        blocks += [
            Heading(f"{compared} against {reference} ({axis})"),
            Paragraph(
                f"Per point, each {axis}'s mean minus {reference}'s with a Welch t interval at "
                f"the run's confidence; {_why(axis, reference)}. Resolvable: the difference "
                "against this run's minimum detectable difference (Welch, 80 % power, from the "
                "observed spread and n) and, for energy, the meter's floor (Meter floor)."
            ),
            difference_table(differences, run.axes, axis, reference),
        ]
    return blocks
