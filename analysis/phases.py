"""The report's "Energy by phase" section: each point's mean energy split into the trial window's
phases (connect, exchange, close: data/README.md, "A trial's phases"), as stacked bars with the
series side by side, a table of the phases' means with their CIs, and for the median-energy
trial of each point its power trace with the phases shaded: a zoom on connect and a slice from
the middle of exchange.

Event marks (qlog traces) are drawn where given: `figure_phase_traces(..., events=...)` takes
each trial's event times, seconds since its window's start, per event class, and draws each
class in a lane of its own at the top of the trace panels; reading the traces is not this
module's job (analysis.qlog_counts.client_marks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from agent.engines import ENGINE_OF_UNNAMED_RUNS, RENAMED, engine_spec
from analysis.columns import WINDOW_AXIS, metric_of
from analysis.document import Block, Heading, Image, Paragraph, Table
from analysis.facts import idle_power_mw, median_trial
from analysis.figures import Source, draw_trace, new_figure, window_label
from analysis.load import Run, load_power
from analysis.manifest import config_value
from analysis.points import metric_rows, plain, x_axis_of
from analysis.tables import number, point_text, value_text
from analysis.trial_columns import PHASES

ENERGY_STEM = "phase_energy"
TRACES_STEM = "phase_traces"
STEMS = (ENERGY_STEM, TRACES_STEM)
"""The section's figures: drawn in it, not among the report's other figures."""

# A phase looks the same in both figures: its shade (alpha over the series' colour in the bars,
# over grey behind a trace) and its hatch, so a series keeps its colour from the other figures.
_STYLE: dict[str, tuple[float, str]] = {
    "connect": (0.95, "///"),
    "exchange": (0.5, ""),
    "close": (0.25, "..."),
}
_ZOOM_CONNECTS = 3.0  # the connect zoom spans this many connect phases
_MIN_ZOOM_SAMPLES = 5  # ... and at least this many samples, so a sub-sample connect shows some
_SLICE_SAMPLES = 50  # the transfer slice: this many samples from the middle of exchange

EventTimes = Mapping[str, Sequence[float]]
"""One trial's events: per event class (its label in the legend), seconds since the window's
start."""
_MARK_SHARE = 0.4  # of a trace panel's height, the top, for the event marks' lanes
# Marks' colours: apart from the series' (C0, C1, ...), which the power traces take.
_MARK_COLORS = ("#d62728", "#9467bd", "#2ca02c", "#e377c2", "#17becf", "#bcbd22", "#8c564b", "0.2")


def _energy(phase: str, above_idle: bool) -> str:
    return f"energy_{phase}_above_idle_mj" if above_idle else f"energy_{phase}_mj"


def _with_phases(ok: pd.DataFrame) -> pd.DataFrame:
    """The ok rows whose every phase energy was recorded."""
    columns = [_energy(phase, False) for phase in PHASES]
    if not set(columns) <= set(ok.columns):
        return ok.iloc[0:0]
    return ok.dropna(subset=columns)


def recorded(run: Run) -> bool:
    return not _with_phases(run.ok).empty


def _not_recorded(run: Run) -> str | None:
    """Why a run whose engine cannot tell phases apart has none; None for a run from before
    phases (its report says nothing of them, as it did then)."""
    engine = config_value(run.manifest, "nodes.client.engine") or ENGINE_OF_UNNAMED_RUNS
    if "phase_clock" not in run.ok or engine_spec(RENAMED.get(engine, engine)).client_phases:
        return None
    return (
        f"Energy by phase: not recorded. The {engine} engine's tools show the agent nothing "
        "between their start and their end, so its trials leave the phase columns empty."
    )


def _series_color(index: int) -> str:
    """The series' colour in the report's other figures (figures._errorbars: C0, C1, ...)."""
    return f"C{index}"


def _means(source: Source, metric: str) -> dict[str, dict[object, pd.Series]]:
    """Per series label, per x value, the metric's summary row."""
    return {
        label: {plain(row[source.x_axis]): row for _, row in rows.iterrows()}
        for label, rows in source.lines(metric)
    }


def _stack(ax: Axes, source: Source, phases: Sequence[str], above_idle: bool) -> list[object]:
    """Stacked bars of `phases`' mean energies per x value, a bar per series side by side;
    the full stack also gets the point's mean energy with its CI on top. Returns the x values."""
    total = "energy_above_idle_mj" if above_idle else "energy_mj"
    totals = _means(source, total)
    xs = sorted({x for per_x in totals.values() for x in per_x}, key=_order)
    width = 0.8 / max(len(totals), 1)
    for index, (label, per_x) in enumerate(totals.items()):
        shift = (index - (len(totals) - 1) / 2) * width
        positions = np.array([xs.index(x) + shift for x in per_x])
        # A phase can cost less than idle (a short close at idle power, less noise): stacked
        # from zero downwards, apart from the others, so no segment hides another.
        above, below = np.zeros(len(per_x)), np.zeros(len(per_x))
        for phase in phases:
            rows = _means(source, _energy(phase, above_idle)).get(label, {})
            heights = np.nan_to_num([rows[x]["mean"] if x in rows else np.nan for x in per_x])
            bottom = np.where(heights < 0, below, above)
            alpha, hatch = _STYLE[phase]
            ax.bar(
                positions,
                heights,
                width,
                bottom=bottom,
                color=_series_color(index),
                alpha=alpha,
                hatch=hatch,
                edgecolor="white",
                linewidth=0.5,
                label=f"{label}: {phase}" if label else phase,
            )
            above += np.maximum(heights, 0.0)
            below += np.minimum(heights, 0.0)
        if len(phases) == len(PHASES):
            mean = np.array([row["mean"] for row in per_x.values()])
            low = np.array([row["ci_low"] for row in per_x.values()])
            high = np.array([row["ci_high"] for row in per_x.values()])
            error = np.nan_to_num(np.vstack((mean - low, high - mean)), nan=0.0)
            ax.errorbar(positions, mean, yerr=error, fmt="none", ecolor="0.2", capsize=3)
    return xs


def _order(value: object) -> tuple[int, float, str]:
    """Numbers first, by value; then categories by name."""
    return (0, float(value), "") if isinstance(value, int | float) else (1, 0.0, str(value))


def _legend_handles(source: Source) -> list[Patch]:
    series = [label for label, _rows in source.lines("energy_mj")]
    handles = [
        Patch(facecolor=_series_color(i), label=label) for i, label in enumerate(series) if label
    ]
    for phase in PHASES:
        alpha, hatch = _STYLE[phase]
        handles.append(
            Patch(facecolor="0.35", alpha=alpha, hatch=hatch, edgecolor="white", label=phase)
        )
    return handles


def figure_phase_energy(source: Source) -> Figure | None:
    """Per point, the mean energy stacked by phase (total and above idle), and beside each the
    connect and close phases alone on their own scale: they are a sliver of the full stack."""
    if not source.lines(_energy("connect", False)):
        return None
    figure = new_figure(11.0, 7.0)
    axes = figure.subplots(2, 2)
    for row, above_idle in enumerate((False, True)):
        kind = "above idle" if above_idle else "total"
        for column, phases in enumerate((PHASES, ("connect", "close"))):
            ax = axes[row][column]
            xs = _stack(ax, source, phases, above_idle)
            ax.set_xticks(range(len(xs)), [value_text(x) for x in xs], fontsize=8)
            x_axis = source.x_axis
            # A bar per value, evenly spaced: the window's values, not a log2 scale.
            ax.set_xlabel(
                window_label(source.protocols, log2=False) if x_axis == WINDOW_AXIS else x_axis
            )
            ax.set_ylabel("mJ")
            ax.grid(True, axis="y", alpha=0.3)
            ax.set_title(
                f"{kind} energy by phase (stack = mean energy)"
                if column == 0
                else f"connect and close, {kind} (zoomed)",
                fontsize=10,
            )
            ax.axhline(0.0, color="0.4", linewidth=0.6)
    handles = _legend_handles(source)
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)
    figure.suptitle(
        f"Client energy by phase (mean; total with its {source.summary['confidence'].iloc[0]:.0%}"
        " t-CI)".replace("%", " %"),
        fontsize=11,
    )
    return figure


@dataclass(frozen=True)
class Spans:
    """One trial's phases, seconds since its window's start."""

    connect_s: float
    exchange_s: float
    close_s: float

    def bounds(self) -> dict[str, tuple[float, float]]:
        """Each phase's (start, end): they tile the window from 0."""
        ends = np.cumsum([self.connect_s, self.exchange_s, self.close_s])
        starts = np.concatenate(([0.0], ends[:-1]))
        return {p: (float(s), float(e)) for p, s, e in zip(PHASES, starts, ends, strict=True)}

    def zoom_s(self, sample_s: float) -> tuple[float, float]:
        """The connect zoom: from the window's start over a few connect phases (a few samples
        at least, so a connect shorter than a sample still shows the samples around it)."""
        return 0.0, max(_ZOOM_CONNECTS * self.connect_s, _MIN_ZOOM_SAMPLES * sample_s)

    def slice_s(self, sample_s: float) -> tuple[float, float]:
        """The transfer slice: the middle of exchange, some samples wide (all of it if short)."""
        middle = self.connect_s + self.exchange_s / 2
        half = min(self.exchange_s, _SLICE_SAMPLES * sample_s) / 2
        return middle - half, middle + half


def _spans(row: pd.Series) -> Spans:
    return Spans(*(float(row[f"phase_{phase}_s"]) for phase in PHASES))


def representatives(run: Run) -> list[tuple[tuple[object, ...], pd.Series]]:
    """(point, row) per point of the run: its median-energy ok trial among those with phases."""
    table = _with_phases(run.ok)
    if table.empty:
        return []
    axes = list(run.axes)
    return [
        (tuple(plain(v) for v in (key if isinstance(key, tuple) else (key,))), median_trial(rows))
        for key, rows in table.groupby(axes, sort=True)
    ]


@dataclass(frozen=True)
class Lane:
    """Where a class of events is marked: its colour and its band of the panel's height."""

    color: str
    low: float  # axes fraction
    high: float


def event_lanes(events: Mapping[str, EventTimes]) -> dict[str, Lane]:
    """A lane per event class across every trial's events, so a class keeps its colour and
    its band in every panel: bands stacked down from the panel's top, over `_MARK_SHARE` of
    its height."""
    names = sorted({name for per_trial in events.values() for name in per_trial})
    height = _MARK_SHARE / max(len(names), 1)
    return {
        name: Lane(_MARK_COLORS[i % len(_MARK_COLORS)], 1 - (i + 1) * height, 1 - i * height)
        for i, name in enumerate(names)
    }


def mark_events(ax: Axes, events: EventTimes, lanes: Mapping[str, Lane]) -> None:
    """Each event as a tick in its class's lane (qlog's events, read elsewhere: this draws
    what it is given); the power axis grows upwards to leave the lanes to the marks."""
    for name, times_s in events.items():
        lane = lanes[name]
        ax.vlines(
            np.asarray(times_s, dtype=np.float64) * 1e3,
            lane.low + 0.1 * (lane.high - lane.low),
            lane.high - 0.1 * (lane.high - lane.low),
            transform=ax.get_xaxis_transform(),
            colors=lane.color,
            linewidth=1.0,
            label=name,
        )
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + (high - low) * _MARK_SHARE / (1 - _MARK_SHARE))


def _trace_panel(
    ax: Axes,
    trace: np.ndarray,
    spans: Spans,
    view_s: tuple[float, float],
    *,
    color: str,
) -> None:
    """The samples in `view_s` (and one either side, so the line reaches the panel's edges),
    in ms, over the phases shaded."""
    start_s, end_s = view_s
    t, p = trace[:, 0], trace[:, 1]
    first = max(int(np.searchsorted(t, start_s)) - 1, 0)
    last = min(int(np.searchsorted(t, end_s, side="right")) + 1, t.size)
    draw_trace(ax, t[first:last] * 1e3, p[first:last], color=color, marker=".")
    for phase, (low, high) in spans.bounds().items():
        alpha, hatch = _STYLE[phase]
        ax.axvspan(
            low * 1e3,
            high * 1e3,
            facecolor="0.5",
            alpha=alpha * 0.4,
            hatch=hatch,
            edgecolor="0.75",
            linewidth=0,
        )
        # A boundary is a line too: where a shade is faint, the edge still shows.
        ax.axvline(high * 1e3, color="0.3", linestyle=":", linewidth=0.8)
    ax.set_xlim(start_s * 1e3, end_s * 1e3)
    ax.grid(True, alpha=0.3)


def _finish_panel(
    ax: Axes, idle_mw: float | None, events: EventTimes | None, lanes: Mapping[str, Lane]
) -> None:
    """The idle line, then the event marks (their lanes above the power's range, idle's too)."""
    ax.tick_params(labelsize=7)
    if idle_mw is not None:
        ax.axhline(idle_mw, color="0.4", linestyle="--", linewidth=1)
    if events:
        mark_events(ax, events, lanes)


def figure_phase_traces(
    run: Run, events: Mapping[str, EventTimes] | None = None
) -> tuple[Figure, list[str]] | None:
    """A row per x value, per series two panels: the connect zoom and the transfer slice of the
    point's median-energy trial; `events`: per trial id, its event times to mark. Also returns
    the trials without a saved trace."""
    picks = representatives(run)
    if not picks:
        return None
    axes_names = list(run.axes)
    x_axis = x_axis_of(run.ok, run.axes)
    x_index = axes_names.index(x_axis)
    xs = sorted({point[x_index] for point, _row in picks}, key=_order)
    series = sorted(
        {point[:x_index] + point[x_index + 1 :] for point, _row in picks}
    )  # as the bars' series (Source.lines groups sorted), so each keeps its colour
    figure = new_figure(3.4 * 2 * len(series) + 0.4, 2.5 * len(xs) + 0.6)
    grid = figure.subplots(len(xs), 2 * len(series), squeeze=False)
    idle_mw = idle_power_mw(run)
    lanes = event_lanes(events or {})
    missing: list[str] = []
    for point, row in picks:
        other = point[:x_index] + point[x_index + 1 :]
        s = series.index(other)
        zoom_ax, slice_ax = grid[xs.index(point[x_index])][2 * s : 2 * s + 2]
        trial_id = str(row["trial_id"])
        trace = load_power(run, trial_id)
        where = point_text(pd.Series(dict(zip(axes_names, point, strict=True))), axes_names)
        if trace is None or trace.shape[0] < 2:
            missing.append(trial_id)
            for ax in (zoom_ax, slice_ax):
                ax.text(0.5, 0.5, f"{where}: no power trace", ha="center", transform=ax.transAxes)
                ax.set_axis_off()
            continue
        spans = _spans(row)
        sample_s = float(np.median(np.diff(trace[:, 0])))
        trial_events = (events or {}).get(trial_id)
        color = _series_color(s)
        for ax, view_s in ((zoom_ax, spans.zoom_s(sample_s)), (slice_ax, spans.slice_s(sample_s))):
            _trace_panel(ax, trace, spans, view_s, color=color)
        zoom_ax.set_title(
            f"{where}\n{trial_id}, {row['energy_mj']:.4g} mJ: connect "
            f"{spans.connect_s * 1e3:.3g} ms",
            fontsize=8,
        )
        slice_ax.set_title(
            f"exchange's middle ({spans.exchange_s * 1e3:.4g} ms in all)", fontsize=8
        )
        zoom_ax.set_ylabel("client power (mW)", fontsize=8)
        for ax in (zoom_ax, slice_ax):
            _finish_panel(ax, idle_mw, trial_events, lanes)
    for ax in grid[-1]:
        ax.set_xlabel("time since window start (ms)", fontsize=8)
    handles: list[Artist] = [
        Patch(facecolor="0.5", alpha=alpha * 0.4, hatch=hatch, edgecolor="0.75", label=phase)
        for phase, (alpha, hatch) in _STYLE.items()
    ]
    handles.append(Line2D([], [], color="0.3", linestyle=":", label="phase boundary"))
    handles.append(Line2D([], [], color="0.3", marker=".", linewidth=0.7, label="meter samples"))
    if idle_mw is not None:
        handles.append(Line2D([], [], color="0.4", linestyle="--", label="idle baseline"))
    labelled = {h.get_label() for h in handles}
    for ax in grid.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labelled and label != "power":
                handles.append(handle)
                labelled.add(label)
    figure.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=7)
    figure.suptitle("Median-energy trial per point: connect zoomed, exchange's middle", fontsize=10)
    return figure, missing


def _cell(row: pd.Series | None) -> str:
    if row is None:
        return "-"
    return f"{number(row['mean'])} [{number(row['ci_low'])}, {number(row['ci_high'])}]"


def _by_point(rows: pd.DataFrame, axes: Sequence[str]) -> dict[tuple[object, ...], pd.Series]:
    return {tuple(plain(row[a]) for a in axes): row for _, row in rows.iterrows()}


def phase_table(summary: pd.DataFrame, axes: Sequence[str]) -> Table:
    """Per point, total and above idle: each phase's mean energy with its CI, and the point's
    mean energy beside them."""
    body: list[tuple[str, ...]] = []
    level = f"{summary['confidence'].iloc[0] * 100:g} %"
    for above_idle in (False, True):
        total = "energy_above_idle_mj" if above_idle else "energy_mj"
        phases = [_by_point(metric_rows(summary, _energy(p, above_idle)), axes) for p in PHASES]
        for point, row in _by_point(metric_rows(summary, total), axes).items():
            connect = phases[0].get(point)
            body.append(
                (
                    point_text(row, axes),
                    "above idle" if above_idle else "total",
                    "0" if connect is None else str(int(connect["n"])),
                    *(_cell(rows.get(point)) for rows in phases),
                    _cell(row),
                )
            )
    unit = metric_of("energy_mj").display_unit
    return Table(
        ("point", "energy", "n", *(f"{p} ({unit})" for p in PHASES), f"whole window ({unit})"),
        tuple(body),
        f"Mean energy per phase [{level} t-CI], over the ok trials with phases (n); the last "
        "column is the point's mean energy over all its ok trials.",
    )


def _placement(run: Run) -> str:
    table = _with_phases(run.ok)
    clocks = table["phase_clock"].fillna("").astype(str).value_counts()
    marker, offset = int(clocks.get("marker", 0)), int(clocks.get("clock_offset", 0))
    unphased = len(run.ok) - len(table)
    ways = []
    if marker:
        ways.append(
            "through the marker's two edges, known on both clocks so the map also takes out "
            f"drift (phase_clock marker), in {marker} trials"
        )
    if offset:
        ways.append(f"through the measured clock offset (clock_offset) in {offset} trials")
    return f"The boundaries were placed on the meter's samples {', and '.join(ways)}." + (
        f" {unphased} ok trials recorded no phases." if unphased else ""
    )


def phase_blocks(run: Run, summary: pd.DataFrame, images: Mapping[str, Image]) -> list[Block]:
    """The section: what the phases are and that they sum to the energy, how they were placed,
    the bars, the table and the traces (`images`: the section's figures drawn, by stem)."""
    if not recorded(run):
        reason = _not_recorded(run)
        return [Paragraph(reason)] if reason else []
    blocks: list[Block] = [
        Heading("Energy by phase"),
        Paragraph(
            "Each trial's window is split into connect (its start to the connection usable: "
            "TCP and TLS, or QUIC's handshake), exchange (to the workload's last response "
            "byte) and close (to the connection closed). The phases tile the window, so a "
            "trial's energy_connect_mj + energy_exchange_mj + energy_close_mj is its energy_mj "
            "(and above idle, its energy_above_idle_mj): each stack below is its point's mean "
            "energy. " + _placement(run)
        ),
    ]
    if ENERGY_STEM in images:
        blocks.append(images[ENERGY_STEM])
    blocks.append(phase_table(summary, run.axes))
    if TRACES_STEM in images:
        blocks.append(images[TRACES_STEM])
    return blocks


ENERGY = (
    "Mean client energy per point stacked by phase, a bar per series side by side in the "
    "colours of the other figures (error bar: the point's mean energy and its t-CI); right: "
    "connect and close alone, on their own scale."
)
TRACES = (
    "Client power of each point's median-energy trial with its phases shaded: left, from the "
    f"window's start over {_ZOOM_CONNECTS:g} connect phases (at least {_MIN_ZOOM_SAMPLES} "
    f"samples); right, {_SLICE_SAMPLES} samples from the middle of exchange. Dots: the meter's "
    "samples; dashed: idle baseline. Where the run has traces, the client's events are marked "
    "at the top, a lane and a colour per class (HTTP/2 frames, or QUIC packets, datagrams, "
    "ACK and flow-control frames and handshake packets), placed through the client's wall "
    "clock at the window's start."
)


def phase_figures(
    run: Run, source: Source, events: Mapping[str, EventTimes] | None = None
) -> tuple[list[tuple[str, Figure, str]], list[str]]:
    """The section's figures as (stem, figure, caption), and notes on traces not saved."""
    figures: list[tuple[str, Figure, str]] = []
    notes: list[str] = []
    energy = figure_phase_energy(source)
    if energy is not None:
        figures.append((ENERGY_STEM, energy, ENERGY))
    traces = figure_phase_traces(run, events)
    if traces is not None:
        figure, missing = traces
        figures.append((TRACES_STEM, figure, TRACES))
        if missing:
            notes.append(f"Energy by phase: no power trace saved for {', '.join(missing)}.")
    return figures, notes
