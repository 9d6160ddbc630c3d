"""The study's figures (and ours) from a summary table: means with t-based CI error bars on a
log2 window axis, the flow-control and link bounds, power traces, frames per byte.

Figures are built on `matplotlib.figure.Figure` with the Agg canvas and never through pyplot, so
nothing here touches global state or needs a display. Each function returns a Figure; `save`
writes it as PNG and SVG.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from agent.protocols import DEFAULT_PROTOCOL, PROTOCOLS, protocol_spec
from analysis.bounds import Bounds
from analysis.columns import WINDOW_AXIS, metric_of
from analysis.frame_model import Fit as FrameFit
from analysis.points import metric_rows, plain, x_axis_of

PNG_DPI = 110
_LOG_RANGE = 30.0
_NOTE_CHARS_PER_INCH = 21  # 6.5 pt text
_NOTE_LINE_INCH = 0.13  # a y range wider than this factor is drawn on a log axis
_MAX_TRACE_POINTS = 300  # blocks beyond this: a min..max band and the block mean
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_LINESTYLES = ("-", "--", "-.", ":")


@dataclass(frozen=True)
class Source:
    """One run's summary as figures see it; `label` names the run when several share a figure."""

    summary: pd.DataFrame
    axes: tuple[str, ...]
    label: str = ""
    # The run's (Run.protocols): they name the window axis.
    protocols: tuple[str, ...] = (DEFAULT_PROTOCOL,)

    @property
    def x_axis(self) -> str:
        return x_axis_of(self.summary, self.axes)

    def lines(self, metric: str) -> list[tuple[str, pd.DataFrame]]:
        """(series label, rows sorted by x) per combination of the other swept settings."""
        rows = metric_rows(self.summary, metric)
        rows = rows[rows["n"] > 0]
        others = [a for a in self.axes if a != self.x_axis]
        if not others:
            return [("", rows.sort_values(self.x_axis))] if not rows.empty else []
        lines = []
        for key, group in rows.groupby(others, sort=True):
            values = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{a} = {plain(v)}" for a, v in zip(others, values, strict=True))
            lines.append((label, group.sort_values(self.x_axis)))
        return lines


def new_figure(width: float, height: float, note: str = "") -> Figure:
    """A figure on the Agg canvas, with `note` wrapped as a footnote under the axes."""
    lines = [
        wrapped
        for paragraph in note.splitlines()
        for wrapped in textwrap.wrap(paragraph, int(width * _NOTE_CHARS_PER_INCH))
    ]
    extra = len(lines) * _NOTE_LINE_INCH
    bottom = (extra + 0.05) / (height + extra) if lines else 0.0
    figure = Figure(
        figsize=(width, height + extra),
        layout=ConstrainedLayoutEngine(rect=(0.0, bottom, 1.0, 1.0 - bottom)),
    )
    FigureCanvasAgg(figure)
    if lines:
        figure.text(0.01, 0.01, "\n".join(lines), fontsize=6.5, color="0.3", va="bottom")
    return figure


def save(figure: Figure, directory: Path, stem: str) -> tuple[Path, Path]:
    """Writes `stem`.png and `stem`.svg (without timestamps, so reruns give the same files)."""
    directory.mkdir(parents=True, exist_ok=True)
    png, svg = directory / f"{stem}.png", directory / f"{stem}.svg"
    figure.savefig(png, dpi=PNG_DPI, metadata={"Software": None})
    # The layout the PNG's draw computed holds for the SVG too (it is in figure coordinates):
    # laying the figure out again doubled the cost of every report.
    figure.set_layout_engine("none")
    figure.savefig(svg, metadata={"Date": None})
    return png, svg


def _powers_of_two(values: Sequence[float]) -> bool:
    return all(v > 0 and float(v).is_integer() and int(v) & (int(v) - 1) == 0 for v in values)


def _window_setting(protocol: str) -> str:
    """What the window axis sets in `protocol`: HTTP/2's SETTINGS or QUIC's per-stream window
    (initial_max_stream_data, agent.h3.settings)."""
    quic = protocol in PROTOCOLS and protocol_spec(protocol).quic
    return "initial_max_stream_data" if quic else "SETTINGS_INITIAL_WINDOW_SIZE"


def window_label(protocols: Iterable[str], log2: bool = True) -> str:
    """The window axis by what it sets in the protocols drawn; when they set different
    settings, a short name for both, short enough for three panels side by side (their names:
    `window_note`, for the caption). `log2`: the axis is scaled so (bars a value each are not)."""
    settings = {_window_setting(p) for p in protocols}
    unit = "B, log2" if log2 else "B"
    return f"{settings.pop()} ({unit})" if len(settings) == 1 else f"stream window ({unit})"


def window_note(protocols: Iterable[str]) -> str:
    """The caption's sentence naming what the window axis sets per protocol, when the
    protocols drawn set different settings (window_label then names neither); "" otherwise."""
    drawn = tuple(dict.fromkeys(protocols))
    if len({_window_setting(p) for p in drawn}) < 2:
        return ""
    per = "; ".join(f"{p}: {_window_setting(p)}" for p in drawn)
    return f" The stream window is the receiver's per-stream window ({per})."


def _x_axis(ax: Axes, name: str, values: Sequence[object], window: str) -> None:
    """A numeric axis gets a tick per value, on log2 where they are powers of two (the window's
    65535 counts as 2^16); a categorical one keeps matplotlib's category ticks. `window`
    labels the window axis."""
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if len(numbers) != len(values):
        ax.set_xlabel(name)
        return
    ticks = sorted(set(numbers))
    log2 = bool(ticks) and ((name == WINDOW_AXIS and min(ticks) > 0) or _powers_of_two(ticks))
    if log2:
        ax.set_xscale("log", base=2)
    if ticks:
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{t:g}" for t in ticks], rotation=45, ha="right", fontsize=8)
    if name == WINDOW_AXIS:
        ax.set_xlabel(window)
    else:
        ax.set_xlabel(f"{name} (log2)" if log2 else name)


def _y_scale(ax: Axes, values: Sequence[float]) -> None:
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if positive and max(positive) / min(positive) > _LOG_RANGE:
        _log_y(ax)


def _log_y(ax: Axes) -> None:
    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _pos: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _pos: ""))


def interval_bars(rows: pd.DataFrame) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Summary rows' means and their t intervals as errorbar's `yerr` (below, above; 0 where
    a point has no interval)."""
    mean = rows["mean"].to_numpy(dtype=np.float64)
    low = rows["ci_low"].to_numpy(dtype=np.float64)
    high = rows["ci_high"].to_numpy(dtype=np.float64)
    return mean, np.nan_to_num(np.vstack((mean - low, high - mean)), nan=0.0)


def _label(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


def _errorbars(
    ax: Axes, sources: Sequence[Source], metrics: Sequence[str]
) -> tuple[list[object], list[float]]:
    """Draws every source x metric x series; returns the x values and y extremes drawn."""
    xs: list[object] = []
    ys: list[float] = []
    line = 0
    for source_index, source in enumerate(sources):
        for metric_index, metric in enumerate(metrics):
            info = metric_of(metric)
            lines = source.lines(metric)
            for series_index, (series, rows) in enumerate(lines):
                # Several runs: a colour per run, a line style per metric, a marker per series.
                # One run of several series (h2 and h3): the colour per series too, the same in
                # every panel, so the series read side by side.
                if len(sources) > 1 or len(lines) > 1:
                    color = f"C{source_index if len(sources) > 1 else series_index}"
                    style = _LINESTYLES[metric_index % len(_LINESTYLES)]
                    marker = _MARKERS[series_index % len(_MARKERS)]
                else:
                    color, style, marker = f"C{line}", "-", _MARKERS[line % len(_MARKERS)]
                line += 1
                x = [plain(v) for v in rows[source.x_axis]]
                mean = rows["mean"].to_numpy(dtype=np.float64) * info.scale
                low = rows["ci_low"].to_numpy(dtype=np.float64) * info.scale
                high = rows["ci_high"].to_numpy(dtype=np.float64) * info.scale
                yerr = np.nan_to_num(np.vstack((mean - low, high - mean)), nan=0.0)
                name = _label(source.label, info.label if len(metrics) > 1 else "", series)
                ax.errorbar(
                    x,
                    mean,
                    yerr=yerr,
                    color=color,
                    linestyle=style,
                    marker=marker,
                    markersize=4,
                    capsize=3,
                    linewidth=1.2,
                    label=name or info.label,
                )
                xs.extend(x)
                ys.extend([*np.nan_to_num(low, nan=mean).tolist(), *high.tolist()])
    return xs, ys


_BOUND_COLORS = ("black", "0.55", "tab:brown", "tab:olive")


def _draw_bounds(
    ax: Axes, bounds: Bounds, xs: Sequence[float], label: str, index: int
) -> list[float]:
    if not xs:
        return []
    grid = np.geomspace(min(xs), max(xs), 64)
    color = _BOUND_COLORS[index % len(_BOUND_COLORS)]
    drawn: list[float] = []
    flow = bounds.flow_control_s(grid)
    if np.isfinite(flow).all():
        name = _label("flow-control bound", label)
        ax.plot(grid, flow, linestyle="--", color=color, linewidth=1, label=name)
        drawn.extend(flow.tolist())
    link = bounds.link_s
    if link is not None:
        name = _label("link bound", label)
        ax.axhline(link, color=color, linestyle=":", linewidth=1.4, label=name)
        drawn.append(link)
    return drawn


def _panel(
    ax: Axes,
    sources: Sequence[Source],
    metrics: Sequence[str],
    title: str,
    bounds: Sequence[Bounds] = (),
) -> None:
    xs, ys = _errorbars(ax, sources, metrics)
    if bounds and sources and sources[0].x_axis == WINDOW_AXIS:
        # An interval reaching below zero (n = 2 gives t = 6.3) must not set a log axis's bottom.
        measured = [y for y in ys if math.isfinite(y) and y > 0]
        drawn: list[float] = []
        for index, (source, bound) in enumerate(zip(sources, bounds, strict=True)):
            windows = [float(x) for x in xs if isinstance(x, int | float)]
            drawn += _draw_bounds(ax, bound, windows, source.label, index)
        # A bound far below every point would flatten the data; clip the view, not the line.
        if measured and drawn:
            ax.set_ylim(bottom=max(min(drawn + measured) * 0.8, min(measured) / 50))
        ys = ys + drawn
    info = metric_of(metrics[0])
    ax.set_ylabel(info.display_unit)
    ax.set_title(title, fontsize=10)
    if not xs:
        ax.text(0.5, 0.5, "no values in this run", ha="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    _y_scale(ax, ys)
    _x_axis(ax, sources[0].x_axis, xs, window_label(p for s in sources for p in s.protocols))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7)


def _confidence(sources: Sequence[Source]) -> str:
    values = {float(c) for s in sources for c in s.summary["confidence"].unique()}
    return "/".join(f"{c:.0%}" for c in sorted(values)).replace("%", " %")


def _suptitle(figure: Figure, title: str, sources: Sequence[Source]) -> None:
    figure.suptitle(f"{title} (mean, {_confidence(sources)} t-CI)", fontsize=11)


def _bounds_note(sources: Sequence[Source], bounds: Sequence[Bounds]) -> str:
    if not bounds:
        return ""
    return "\n".join(
        f"{source.label}: {bound.caption()}" if source.label else bound.caption()
        for source, bound in zip(sources, bounds, strict=True)
    )


def figure_client(sources: Sequence[Source], bounds: Sequence[Bounds] = ()) -> Figure:
    """Study Figure 1; `bounds` pairs with `sources` (one per run) or is empty."""
    figure = new_figure(13.5, 4.6, _bounds_note(sources, bounds))
    axes = figure.subplots(1, 3)
    _panel(axes[0], sources, ["client_response_s"], "response time", bounds)
    _panel(axes[1], sources, ["client_cpu_s"], "CPU time")
    _panel(axes[2], sources, ["energy_mj", "energy_above_idle_mj"], "energy")
    _suptitle(figure, "Figure 1: client", sources)
    return figure


def figure_server(sources: Sequence[Source], bounds: Sequence[Bounds] = ()) -> Figure:
    figure = new_figure(9.5, 4.6)
    axes = figure.subplots(1, 2)
    _panel(axes[0], sources, ["server_serve_s"], "response (serve) time", bounds)
    _panel(axes[1], sources, ["server_cpu_s"], "CPU time")
    _suptitle(figure, "Figure 2: server", sources)
    return figure


def figure_cpu_pct(sources: Sequence[Source], emulated_roles: Sequence[str] = ()) -> Figure:
    """Study Figure 3; `emulated_roles`: the nodes whose lines are in percent of their emulated
    core (the sources' summaries already divided by the quota: points.per_emulated_core)."""
    figure = new_figure(6.5, 4.6)
    ax = figure.subplots()
    _panel(ax, sources, ["client_cpu_pct", "server_cpu_pct"], "CPU time / response time")
    label = "% of one core"
    if emulated_roles:
        label += f"\n{', '.join(emulated_roles)}: of the emulated core"
    ax.set_ylabel(label)
    _suptitle(figure, "Figure 3: CPU %, client and server", sources)
    return figure


def figure_memory(sources: Sequence[Source]) -> Figure:
    figure = new_figure(6.5, 4.6)
    ax = figure.subplots()
    _panel(ax, sources, ["client_rss_peak_bytes", "server_rss_peak_bytes"], "peak RSS")
    _suptitle(figure, "Peak memory, client and server", sources)
    return figure


def figure_frames(sources: Sequence[Source]) -> Figure | None:
    metrics = [
        m
        for m in ("client_data_frames_per_byte", "client_window_update_frames_per_byte")
        if any(source.lines(m) for source in sources)
    ]
    if not metrics:
        return None
    figure = new_figure(6.5, 4.6)
    ax = figure.subplots()
    _panel(ax, sources, metrics, "frames per byte received")
    ax.set_ylabel("frames / B")
    _log_y(ax)
    _suptitle(figure, "Frames per byte (client)", sources)
    return figure


def figure_workload(sources: Sequence[Source], kind: str, columns: Sequence[str]) -> Figure | None:
    """One panel per column the workload adds (its own metrics), beside the study's figures."""
    drawn = [c for c in columns if any(source.lines(c) for source in sources)]
    if not drawn:
        return None
    width = min(len(drawn), 3)
    height = math.ceil(len(drawn) / width)
    figure = new_figure(4.5 * width, 4.0 * height)
    axes = figure.subplots(height, width, squeeze=False).ravel()
    for ax, column in zip(axes, drawn, strict=False):
        _panel(ax, sources, [column], metric_of(column).label)
    for ax in axes[len(drawn) :]:
        ax.set_visible(False)
    _suptitle(figure, f"Workload {kind}: its own metrics", sources)
    return figure


@dataclass(frozen=True)
class Trace:
    """One trial's power samples: seconds since the window's start, mW."""

    title: str
    t_s: np.ndarray
    power_mw: np.ndarray


def draw_trace(
    ax: Axes, t: np.ndarray, p: np.ndarray, color: str = "tab:blue", marker: str = ""
) -> None:
    """Power against time; beyond `_MAX_TRACE_POINTS` samples, a min..max band and the mean
    per block of samples, so a long trace neither hides its spikes nor draws every sample."""
    block = math.ceil(t.size / _MAX_TRACE_POINTS)
    if block > 1:
        usable = t.size // block * block
        tb = t[:usable].reshape(-1, block)
        pb = p[:usable].reshape(-1, block)
        span_ms = (t[block] - t[0]) * 1e3
        ax.fill_between(
            tb[:, 0],
            pb.min(axis=1),
            pb.max(axis=1),
            color=color,
            alpha=0.25,
            linewidth=0,
            label="min .. max per block",
        )
        ax.plot(
            tb[:, 0],
            pb.mean(axis=1),
            color=color,
            linewidth=0.8,
            label=f"mean of {block} samples (~{span_ms:.0f} ms)",
        )
    else:
        ax.plot(t, p, color=color, linewidth=0.7, marker=marker, markersize=3, label="power")


def figure_power(traces: Sequence[Trace], idle_mw: float | None) -> Figure | None:
    if not traces:
        return None
    figure = new_figure(4.3 * len(traces) + 0.5, 3.8)
    axes = figure.subplots(1, len(traces), squeeze=False)[0]
    for ax, trace in zip(axes, traces, strict=True):
        draw_trace(ax, trace.t_s, trace.power_mw)
        if idle_mw is not None:
            ax.axhline(idle_mw, color="0.4", linestyle="--", linewidth=1, label="idle baseline")
        ax.set_title(trace.title, fontsize=9)
        ax.set_xlabel("time since window start (s)")
        ax.set_ylabel("client power (mW)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best", framealpha=0.85)
    figure.suptitle(
        "Client power during representative trials (each: the trial nearest its point's "
        "median energy)",
        fontsize=11,
    )
    return figure


def figure_frame_model(fits: Sequence[FrameFit]) -> Figure | None:
    """Measured against predicted per trial, one panel per fitted response: how well frames,
    bytes and duration explain a trial's energy and CPU time."""
    if not fits:
        return None
    figure = new_figure(4.3 * len(fits) + 0.5, 4.0)
    axes = figure.subplots(1, len(fits), squeeze=False)[0]
    for ax, fit in zip(axes, fits, strict=True):
        measured, predicted = fit.residuals["measured"], fit.residuals["predicted"]
        ax.scatter(predicted, measured, s=14, color="tab:blue", alpha=0.8, label="trials")
        low = float(min(measured.min(), predicted.min()))
        high = float(max(measured.max(), predicted.max()))
        ax.plot([low, high], [low, high], color="0.4", linestyle="--", linewidth=1, label="y = x")
        unit = fit.response.unit
        ax.set_xlabel(f"predicted {fit.response.label} ({unit})")
        ax.set_ylabel(f"measured {fit.response.label} ({unit})")
        ax.set_title(
            f"{fit.group}: R² {fit.r2:.3f}, residual sd {fit.residual_sd:.3g} {unit}", fontsize=9
        )
        if high > 0 and low > 0 and high / low > _LOG_RANGE:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best", framealpha=0.85)
    figure.suptitle("Per-frame cost model: measured vs predicted per trial", fontsize=11)
    return figure
