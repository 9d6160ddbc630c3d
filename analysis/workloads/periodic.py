"""The periodic workload's report (issue 37): a node sending a small report every interval, idle
between, over a kept, a new or a resumed connection.

- The headline figure: energy per report by connection policy (keep/new/resume on x), a series
  per protocol, with CIs: above idle (what the protocol and policy add) and total.
- The findings: whether HTTP/3 costs more than HTTP/2 per report, by how much (each point's
  Welch interval, analysis.categories), and whether that order reverses between `keep` and
  `new` (Caiazza, Luconi and Vecchio 2024 found HTTP/3 dearer for periodic requests).
- The battery view: per point, the energy per report above idle and what it adds per day at
  the point's interval (J/day, and mAh/day at the node's supply voltage, the meter's), beside
  the node's idle draw per day (the run's idle baseline), as a table and a figure, so a reader
  sees when the protocol matters and when idle dominates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from agent.workloads import SPECS
from analysis.categories import (
    category_differences,
    difference_table,
    reference_of,
    series_of,
)
from analysis.document import Block, Heading, Paragraph, Table
from analysis.facts import idle_power_mw
from analysis.figures import Source, interval_bars, new_figure
from analysis.load import Run
from analysis.manifest import config_value
from analysis.points import metric_rows, plain
from analysis.tables import number, value_text
from analysis.trial_columns import PROTOCOL_COLUMN
from analysis.workloads.base import FigureEntry, Headline, WorkloadReport, own_metrics_figures

KIND = "periodic"
CONNECTION_AXIS = "connection"
INTERVAL_AXIS = "interval_s"
PER_REPORT = f"{KIND}_energy_per_report_mj"
PER_REPORT_ABOVE_IDLE = f"{KIND}_energy_per_report_above_idle_mj"
HEADLINE_FIGURE = "periodic_energy_per_report"
BATTERY_FIGURE = "periodic_battery"
SECONDS_PER_DAY = 86_400.0
J_PER_MAH_PER_V = 3.6  # 1 mAh at 1 V: 1e-3 A x 3600 s x 1 V


def connection_policies(run: Run) -> tuple[str, ...]:
    """The run's connection policies in the config's order: the swept ones, else its one."""
    if CONNECTION_AXIS in run.axes:
        return series_of(run, CONNECTION_AXIS)
    return (str(_setting(run, CONNECTION_AXIS)),)


def _setting(run: Run, name: str) -> object:
    """A workload parameter the run did not sweep: the config's, else its declared default."""
    value = config_value(run.manifest, f"workload.{name}")
    return SPECS[KIND].param(name).default if value is None else value


def supply_v(run: Run) -> float:
    """The node's supply voltage: the meter's (`supply_mv` where set, else `supply_v`)."""
    millivolts = config_value(run.manifest, "meter.supply_mv")
    if isinstance(millivolts, int | float) and not isinstance(millivolts, bool):
        return float(millivolts) / 1000
    volts = config_value(run.manifest, "meter.supply_v")
    # A manifest without it: the meter's default, the Pi's 5 V (configs/README.md).
    return float(volts) if isinstance(volts, int | float) else 5.0


@dataclass(frozen=True)
class BatteryPoint:
    """One point's day on a battery: its reports above idle, and the node idle all day."""

    point: tuple[tuple[str, object], ...]
    interval_s: float
    per_report_mj: float  # above idle, mean
    per_report_ci_mj: tuple[float, float]
    reports_per_day: float
    reports_j_per_day: float
    reports_mah_per_day: float
    idle_j_per_day: float
    idle_mah_per_day: float

    @property
    def reports_share(self) -> float:
        """The reports' share of the node's day (reports and idle)."""
        total = self.reports_j_per_day + self.idle_j_per_day
        return self.reports_j_per_day / total if total > 0 else math.nan


def battery_points(
    summary: pd.DataFrame,
    axes: Sequence[str],
    interval_s: float,
    idle_mw: float,
    volts: float,
) -> list[BatteryPoint]:
    """Per point with an energy per report above idle: its day (module doc) at the point's
    interval (the axis where swept, else `interval_s`); a point reporting back to back (an
    interval of 0) has no day of reports."""
    rows = metric_rows(summary, PER_REPORT_ABOVE_IDLE)
    points = []
    idle_j = idle_mw * SECONDS_PER_DAY / 1000
    for _, row in rows[rows["n"] > 0].iterrows():
        interval = float(row[INTERVAL_AXIS]) if INTERVAL_AXIS in axes else interval_s
        if interval <= 0:
            continue
        per_day = SECONDS_PER_DAY / interval
        reports_j = float(row["mean"]) * per_day / 1000
        points.append(
            BatteryPoint(
                tuple((axis, plain(row[axis])) for axis in axes),
                interval,
                float(row["mean"]),
                (float(row["ci_low"]), float(row["ci_high"])),
                per_day,
                reports_j,
                reports_j / volts / J_PER_MAH_PER_V,
                idle_j,
                idle_j / volts / J_PER_MAH_PER_V,
            )
        )
    return points


def _interval_text(low: float, high: float) -> str:
    return "" if math.isnan(low) else f" [{low:.4g}, {high:.4g}]"


def battery_table(points: Sequence[BatteryPoint], volts: float) -> Table:
    axes = [axis for axis, _value in points[0].point] if points else []
    header = (
        *axes,
        *(() if INTERVAL_AXIS in axes else ("interval (s)",)),
        "per report above idle (mJ)",
        "reports/day",
        "reports (J/day)",
        f"reports (mAh/day at {volts:g} V)",
        "idle (J/day)",
        "idle (mAh/day)",
        "reports' share of the day",
    )
    body = tuple(
        (
            *(value_text(value) for _axis, value in point.point),
            *(() if INTERVAL_AXIS in axes else (f"{point.interval_s:g}",)),
            f"{point.per_report_mj:.4g}{_interval_text(*point.per_report_ci_mj)}",
            f"{point.reports_per_day:.4g}",
            f"{point.reports_j_per_day:.4g}",
            f"{point.reports_mah_per_day:.4g}",
            f"{point.idle_j_per_day:.4g}",
            f"{point.idle_mah_per_day:.4g}",
            "-" if math.isnan(point.reports_share) else f"{point.reports_share * 100:.1f} %",
        )
        for point in points
    )
    return Table(header, body, "A day of reports on a battery, per point")


def _battery_inputs(run: Run) -> tuple[float, float | None, float]:
    """(the run's interval where not swept, its idle baseline in mW, the supply voltage)."""
    return float(str(_setting(run, INTERVAL_AXIS))), idle_power_mw(run), supply_v(run)


def battery_blocks(run: Run, summary: pd.DataFrame) -> list[Block]:
    interval, idle, volts = _battery_inputs(run)
    heading = Heading("Battery view: a day of reports")
    if idle is None:
        return [heading, Paragraph("No idle baseline in this run: no battery view.")]
    points = battery_points(summary, run.axes, interval, idle, volts)
    if not points:
        return [heading, Paragraph("No energy per report above idle in this run.")]
    shares = [p.reports_share for p in points if p.per_report_mj > 0]
    if not shares:
        verdict = "no point's reports cost more than idle in this run"
    elif max(shares) < 0.1:
        verdict = (
            "idle dominates the day at every point: the protocol and policy change the "
            f"battery's life by less than a tenth (the reports' largest share {max(shares):.1%})"
        ).replace("%", " %")
    else:
        verdict = (
            "the reports weigh in the day's draw: the protocol and policy change the battery's "
            f"life (the reports' largest share {max(shares):.1%})"
        ).replace("%", " %")
    below = len(points) - len(shares)
    if below:
        verdict += (
            f"; {below} of {len(points)} points measured no more than idle per report (a mean "
            "at or below zero: the report's cost is within the baseline's noise, see Idle "
            "baseline)"
        )
    return [
        heading,
        Paragraph(
            f"Each point's energy per report above the idle baseline (mean, with its "
            f"{run.confidence * 100:g} % t interval) times the reports a day brings at its "
            f"interval, in joules and in mAh at the node's supply ({volts:g} V, the meter's), "
            f"beside the node idle all day at the run's baseline ({idle:.4g} mW): {verdict}."
        ),
        battery_table(points, volts),
    ]


def _dodge(index: int, count: int) -> float:
    """Series side by side within a category, so their intervals do not hide each other."""
    return (index - (count - 1) / 2) * 0.12


def _draw_by_policy(
    ax: Axes, summary: pd.DataFrame, metric: str, policies: Sequence[str], run: Run
) -> None:
    rows = metric_rows(summary, metric)
    rows = rows[rows["n"] > 0]
    protocols = series_of(run, PROTOCOL_COLUMN.name) if PROTOCOL_COLUMN.name in run.axes else ()
    series: list[tuple[str, pd.DataFrame]] = (
        [(p, rows[rows[PROTOCOL_COLUMN.name].map(lambda v: str(plain(v))) == p]) for p in protocols]
        if protocols
        else [(run.protocols[0], rows)]
    )
    for index, (name, rows_of) in enumerate(series):
        position = (
            rows_of[CONNECTION_AXIS].map(lambda v: policies.index(str(plain(v))))
            if CONNECTION_AXIS in run.axes
            else pd.Series(0, index=rows_of.index)
        )
        line = rows_of.assign(_x=position).sort_values("_x")
        x = line["_x"].to_numpy(dtype=np.float64) + _dodge(index, len(series))
        mean, yerr = interval_bars(line)
        # Markers alone ("o", not "o-"): policies are categories, no line runs between them.
        marker, color = "osD^v"[index % 5], f"C{index}"
        ax.errorbar(x, mean, yerr=yerr, fmt=marker, ms=6, capsize=4, color=color, label=name)
    ax.set_xticks(range(len(policies)), policies)
    ax.set_xlim(-0.5, len(policies) - 0.5)
    ax.set_xlabel("connection policy")
    ax.set_ylabel("mJ per report")
    ax.grid(True, axis="y", alpha=0.3)


def figure_per_report(run: Run, summary: pd.DataFrame) -> Figure | None:
    """Energy per report by connection policy, a series per protocol: above idle and total, a
    row of the two per value of any other swept axis; None when the run has no such energy."""
    if metric_rows(summary, PER_REPORT).empty:
        return None
    policies = connection_policies(run)
    others = [a for a in run.axes if a not in (CONNECTION_AXIS, PROTOCOL_COLUMN.name)]
    groups = (
        [(key, part) for key, part in summary.groupby(others, sort=True)]
        if others
        else [((), summary)]
    )
    figure = new_figure(9.0, 3.6 * len(groups))
    panels = figure.subplots(len(groups), 2, squeeze=False)
    for (key, part), row in zip(groups, panels, strict=True):
        values = key if isinstance(key, tuple) else (key,)
        where = ", ".join(f"{a} = {value_text(v)}" for a, v in zip(others, values, strict=True))
        for ax, metric, title in (
            (row[0], PER_REPORT_ABOVE_IDLE, "above idle"),
            (row[1], PER_REPORT, "total"),
        ):
            _draw_by_policy(ax, part, metric, policies, run)
            if metric == PER_REPORT_ABOVE_IDLE:
                ax.axhline(0.0, color="0.5", linewidth=0.8)  # idle: below it, less than idle
            ax.set_title(f"{title}{f' ({where})' if where else ''}", fontsize=10)
    # One legend for every panel, beside them: inside, it sat on the intervals it names.
    handles, labels = panels[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside right upper", fontsize=8, title="protocol",
                  title_fontsize=8)  # fmt: skip
    figure.suptitle(
        f"Client energy per report (mean, {run.confidence:.0%} t-CI)".replace("%", " %"),
        fontsize=11,
    )
    return figure


def figure_battery(points: Sequence[BatteryPoint]) -> Figure | None:
    """A day's draw per point: a bar of its reports above idle, against the node idle all day
    (a line: one baseline for the run), in mAh/day on a log scale so a report's cost and the
    idle draw read on one axis."""
    if not points:
        return None
    labels = [", ".join(value_text(v) for _a, v in point.point) for point in points]
    figure = new_figure(max(6.0, 0.6 * len(points) + 3.5), 4.2)
    ax = figure.subplots()
    x = np.arange(len(points))
    drawn = [p.reports_mah_per_day if p.per_report_mj > 0 else math.nan for p in points]
    ax.bar(x, drawn, 0.6, label="reports, above idle")
    for index, point in enumerate(points):
        if point.per_report_mj <= 0:  # a log axis has no place for it: said where it would be
            ax.text(index, 0.02, "at or below idle", transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", rotation=90, fontsize=7)  # fmt: skip
    idle = points[0].idle_mah_per_day
    ax.axhline(idle, color="0.4", linestyle="--", label=f"node idle all day ({idle:.4g})")
    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels crowd
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(points) - 0.4)  # every point's place, a bar or not
    ax.set_xlabel(", ".join(axis for axis, _v in points[0].point))
    ax.set_ylabel("mAh per day")
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("A day of reports on a battery", fontsize=11)
    return figure


def findings_blocks(run: Run, summary: pd.DataFrame) -> list[Block]:
    """Whether HTTP/3 costs more than HTTP/2 per report, per point, by how much, and whether
    that order reverses between keep and new (module doc)."""
    heading = Heading("HTTP/3 against HTTP/2 per periodic report")
    if PROTOCOL_COLUMN.name not in run.axes:
        return []
    metrics = (PER_REPORT_ABOVE_IDLE, PER_REPORT)
    differences = category_differences(summary, run.axes, PROTOCOL_COLUMN.name, run, metrics)
    if differences.empty:
        return [heading, Paragraph("No point has both protocols' energy per report.")]
    reference = reference_of(PROTOCOL_COLUMN.name, series_of(run, PROTOCOL_COLUMN.name))
    above = differences[differences["metric"] == PER_REPORT_ABOVE_IDLE]
    statements = [_statement(row, reference, run.axes) for _, row in above.iterrows()]
    return [
        heading,
        Paragraph(" ".join(statements) + " " + _reversal(above, reference, run.axes)),
        difference_table(differences, run.axes, PROTOCOL_COLUMN.name, reference),
    ]


def _where(row: pd.Series, axes: Sequence[str]) -> str:
    others = [a for a in axes if a != PROTOCOL_COLUMN.name]
    return ", ".join(f"{a} = {value_text(row[a])}" for a in others) or "this run"


def _sign(row: pd.Series, suffix: str = "") -> int:
    """+1 or -1 where the interval excludes 0, else 0: no order the run can tell."""
    if not bool(row[f"differs{suffix}"]):
        return 0
    return 1 if row[f"difference{suffix}"] > 0 else -1


def _statement(row: pd.Series, reference: str, axes: Sequence[str]) -> str:
    other = str(row[PROTOCOL_COLUMN.name])
    level = f"{row['confidence'] * 100:g} %"
    low, high = row["difference_ci_low"], row["difference_ci_high"]
    amount = (
        f"{number(row['difference'])} mJ per report above idle "
        f"({level} Welch interval [{number(low)}, {number(high)}]"
        # Relative to a reference at or below idle means nothing.
        + ("" if row["mean_base"] <= 0 else f", {row['relative'] * 100:+.1f} %")
        + ")"
    )
    verb = {1: "costs more than", -1: "costs less than", 0: "is not told apart from"}[_sign(row)]
    return f"At {_where(row, axes)}, {other} {verb} {reference}: {amount}."


def _reversal(above: pd.DataFrame, reference: str, axes: Sequence[str]) -> str:
    """Whether a protocol's order against the reference under `keep` is the reverse of its
    order under `new`, at the same values of the other axes."""
    if CONNECTION_AXIS not in axes:
        return ""
    policy = above[CONNECTION_AXIS].map(lambda v: str(plain(v)))
    keys = [PROTOCOL_COLUMN.name]
    keys += [a for a in axes if a not in (CONNECTION_AXIS, PROTOCOL_COLUMN.name)]
    keep, new = above[policy == "keep"], above[policy == "new"]
    if keep.empty or new.empty:
        return "The run has not both keep and new: no reversal to look for."
    found = [
        f"{row[PROTOCOL_COLUMN.name]} against {reference} reverses between keep "
        f"({number(row['difference_keep'])} mJ) and new ({number(row['difference_new'])} mJ)"
        for _, row in keep.merge(new, on=keys, suffixes=("_keep", "_new")).iterrows()
        if _sign(row, "_keep") * _sign(row, "_new") < 0
    ]
    if found:
        return "Reversal: " + "; ".join(found) + "."
    return (
        "No reversal between keep and new: the protocols' order per report above idle is the "
        "same under both, or the run cannot tell it under one of them."
    )


def _figures(run: Run, summary: pd.DataFrame, source: Source) -> list[FigureEntry]:
    figures = own_metrics_figures(run, summary, source)
    per_report = figure_per_report(run, summary)
    if per_report is not None:
        figures.insert(
            0,
            (
                HEADLINE_FIGURE,
                per_report,
                "Client energy per report by connection policy, a series per protocol: above "
                "the idle baseline (what the protocol and policy add) and total (the trial's "
                "energy over its reports, idle between them included).",
            ),
        )
    interval, idle, volts = _battery_inputs(run)
    if idle is not None:
        battery = figure_battery(battery_points(summary, run.axes, interval, idle, volts))
        if battery is not None:
            figures.append(
                (
                    BATTERY_FIGURE,
                    battery,
                    f"A day of reports per point: the reports' energy above idle at the "
                    f"point's interval beside the node idle all day, in mAh at {volts:g} V "
                    "(log scale).",
                )
            )
    return figures


REPORT = WorkloadReport(
    headline=Headline(
        (HEADLINE_FIGURE, f"workload_{KIND}"),
        PER_REPORT_ABOVE_IDLE,
        section="findings",
        needs_axes=(PROTOCOL_COLUMN.name,),
        before_comparisons=True,
    ),
    sections={"findings": findings_blocks, "battery": battery_blocks},
    figures=_figures,
)
