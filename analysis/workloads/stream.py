"""The stream workload's own figure: received rate against payload, as issue 14's reference drew
its breakdown (a line per transport, a panel per demanded rate).

Drawn for any stream run whose axes include `payload_doubles`, a plain sweep or a breakdown
search alike (a search's probes are its points); each panel marks the demanded rate and the 75 %
of it under which the search calls the stream broken down.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.figures import Source, interval_bars
from analysis.load import Run
from analysis.per_unit import PerUnitEnergy
from analysis.points import metric_rows, plain
from analysis.workloads.base import (
    FigureEntry,
    Headline,
    WorkloadReport,
    own_metrics_figures,
    per_unit_figure,
)

PAYLOAD_AXIS = "payload_doubles"
RATE_AXIS = "rate_hz"
RECEIVED = "stream_received_rate_hz"
BREAKDOWN_FRACTION = 0.75  # issue 14: broken down 25 % below the demand
# Energy per item: the metered client's energy over the items it received.
PER_ITEM = PerUnitEnergy(
    "stream_items_received",
    {
        "stream_energy_per_item_mj": "energy_mj",
        "stream_energy_above_idle_per_item_mj": "energy_above_idle_mj",
    },
)


def _panels(rows: pd.DataFrame, axes: Sequence[str]) -> list[tuple[object, pd.DataFrame]]:
    """(demanded rate, its rows) per value of the rate axis, fastest first; one panel of every
    row when the rate was not swept (None: the demand is not known from the axes)."""
    if RATE_AXIS not in axes:
        return [(None, rows)]
    return [
        (plain(rate), group)
        for rate, group in sorted(rows.groupby(RATE_AXIS), key=lambda item: -float(item[0]))
    ]


def figure_received_rate(summary: pd.DataFrame, axes: Sequence[str]) -> Figure | None:
    """Received rate vs payload: a panel per demanded rate, a line per transport (and per
    value of any other axis); None when the run has no stream payload axis."""
    if PAYLOAD_AXIS not in axes:
        return None
    rows = metric_rows(summary, RECEIVED)
    rows = rows[rows["n"] > 0]
    if rows.empty:
        return None
    others = [a for a in axes if a not in (PAYLOAD_AXIS, RATE_AXIS)]
    panels = _panels(rows, axes)
    figure = Figure(figsize=(4.6 * len(panels), 4.0), layout="constrained")
    FigureCanvasAgg(figure)
    for ax, (rate, panel) in zip(
        figure.subplots(1, len(panels), squeeze=False)[0], panels, strict=True
    ):
        series = panel.groupby(others, sort=True) if others else [((), panel)]
        for index, (key, unsorted) in enumerate(series):
            values = key if isinstance(key, tuple) else (key,)
            label = ", ".join(str(plain(v)) for v in values) or "received"
            line = unsorted.sort_values(PAYLOAD_AXIS)
            mean, yerr = interval_bars(line)
            ax.errorbar(
                line[PAYLOAD_AXIS].to_numpy(dtype=np.float64),
                mean,
                yerr=yerr,
                marker="os^Dv"[index % 5],
                markersize=4,
                capsize=3,
                linewidth=1.2,
                label=label,
            )
        if rate is not None and math.isfinite(float(rate)):  # type: ignore[arg-type]
            demanded = float(rate)  # type: ignore[arg-type]
            ax.axhline(demanded, color="black", linewidth=1, label="demanded")
            ax.axhline(
                BREAKDOWN_FRACTION * demanded,
                color="black",
                linestyle="--",
                linewidth=1,
                label=f"{BREAKDOWN_FRACTION:.0%} of demand",
            )
            ax.set_title(f"{RATE_AXIS} = {rate}", fontsize=10)
        ax.set_xscale("log")
        ax.set_xlabel(f"{PAYLOAD_AXIS} (log)")
        ax.set_ylabel("received items/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    confidence = summary["confidence"].iloc[0] if "confidence" in summary else math.nan
    figure.suptitle(
        f"Received rate vs payload (mean, {confidence:.0%} t-CI)".replace("%", " %"),
        fontsize=11,
    )
    return figure


def _figures(run: Run, summary: pd.DataFrame, source: Source) -> list[FigureEntry]:
    figures = own_metrics_figures(run, summary, source) + per_unit_figure(
        run,
        source,
        PER_ITEM,
        "stream_energy",
        "Client energy per item received, total and above the idle baseline: the trial's "
        "energy over the items it received.",
    )
    received = figure_received_rate(summary, run.axes)
    if received is not None:
        figures.append(
            (
                "stream_received_rate",
                received,
                "Received rate against payload, a line per transport, a panel per demanded "
                "rate; solid: the demand, dashed: 75 % of it (the breakdown).",
            )
        )
    return figures


REPORT = WorkloadReport(
    headline=Headline(("stream_received_rate", "workload_stream"), "stream_received_rate_hz"),
    per_unit=PER_ITEM,
    figures=_figures,
)
