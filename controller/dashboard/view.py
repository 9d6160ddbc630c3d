"""Render the sweep's state: a pure function from state to a rich renderable."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from analysis.stats import summarize
from analysis.trial_columns import PHASES
from controller.dashboard.state import (
    OptimizeProgress,
    PointResults,
    SearchProgress,
    SweepState,
    TrialFinished,
)

_BARS = "▁▂▃▄▅▆▇█"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def sparkline(values: list[float], width: int) -> str:
    if not values:
        return ""
    step = max(1, math.ceil(len(values) / width))
    bins = [
        sum(values[i : i + step]) / len(values[i : i + step]) for i in range(0, len(values), step)
    ]
    low, high = min(bins), max(bins)
    span = high - low or 1.0
    return "".join(_BARS[min(7, int((v - low) / span * 8))] for v in bins)


def _mean_ci(values: list[float], confidence: float, scale: float) -> str:
    """Mean and half-width rounded to the half-width's second significant figure, so a row fits
    an 80-column terminal without hiding what the interval says."""
    if not values:
        return "-"
    summary = summarize(values, confidence)
    mean = summary.mean * scale
    if summary.n < 2 or not math.isfinite(summary.half_width):
        return f"{mean:.1f}"
    half = summary.half_width * scale
    digits = 1 if half == 0 else min(2, max(0, 1 - math.floor(math.log10(half))))
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def _results_table(state: SweepState) -> Table:
    confidence = f"{state.confidence:.0%}"
    table = Table(title=f"results so far (mean ± {confidence} CI)", expand=False)
    # Headings may wrap at their spaces; numbers never do.
    for index, axis in enumerate(state.axes):
        # A value is never cut short (a category reads "concur…" otherwise); headings wrap.
        widest = max((len(str(point[index][1])) for point in state.points), default=1)
        table.add_column(axis.replace("_", " "), justify="right", min_width=widest)
    # Two-line headings: the numbers, not their names, set the widths.
    for heading in ("n", "failed", "response\nms", "client\nCPU ms", "energy\nmJ"):
        table.add_column(heading, justify="right", no_wrap=True)
    for point in sorted(state.points):
        results: PointResults = state.points[point]
        table.add_row(
            *(str(value) for _name, value in point),
            str(len(results.response_s)),
            str(results.failed),
            _mean_ci(results.response_s, state.confidence, 1000),
            _mean_ci(results.client_cpu_s, state.confidence, 1000),
            _mean_ci(results.energy_mj, state.confidence, 1),
        )
    return table


def optimize_text(search: OptimizeProgress) -> str:
    """Where an optimizing search is: its trials of the budget and the best point so far."""
    used = f"proposal {search.proposal}, {search.trials_used} of {search.budget} trials"
    if not search.best:
        return f"{used}; nothing measured yet"
    if search.best_interval is None:
        return f"{used}; front of {len(search.best)} points"
    mean, low, high = search.best_interval
    where = ", ".join(f"{name}={value}" for name, value in search.best[0])
    return f"{used}; best {where}: {mean:.4g} [{low:.4g}, {high:.4g}]"


def search_text(search: SearchProgress | OptimizeProgress) -> str:
    """Where a breakdown search is: group, probe, and the bracket it has narrowed so far."""
    if isinstance(search, OptimizeProgress):
        return optimize_text(search)
    group = ", ".join(f"{name}={value}" for name, value in search.group)

    def end(value: float | None) -> str:
        return "?" if value is None else str(value)

    return (
        f"group {search.group_index}/{search.groups} ({group}): probe {search.probe} at "
        f"{search.param}={search.value}, {search.trials_at_probe} trials so far; "
        f"breakdown between {end(search.passing)} and {end(search.failing)}"
    )


def phases_text(finished: TrialFinished) -> str:
    """A trial's energy by phase, each in mJ and as its share of the three."""
    assert finished.phases_mj is not None
    total = sum(finished.phases_mj) or 1.0
    split = ", ".join(
        f"{phase} {mj:.1f} mJ ({mj / total:.0%})"
        for phase, mj in zip(PHASES, finished.phases_mj, strict=True)
    )
    return f"{finished.trial_id}: {split}"


def exchanges_text(finished: TrialFinished) -> str:
    """A trial's exchanges: ok and failed, then its handshakes by kind."""
    assert finished.exchanges is not None
    counts = dict(finished.exchanges)
    ok, failed = counts.pop("ok", 0), counts.pop("failed", 0)
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return f"{finished.trial_id}: {ok} ok, {failed} failed; handshakes {kinds or 'none'}"


def _status(state: SweepState) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row(
        "progress",
        ProgressBar(total=max(state.total_trials, 1), completed=state.done_trials, width=60),
    )
    current = state.current
    if current is not None:
        settings = ", ".join(f"{name}={value}" for name, value in current.point)
        attempt = f", attempt {current.attempt}" if current.attempt > 1 else ""
        grid.add_row(
            "trial", f"{current.trial_id}: {settings}, repetition {current.repetition}{attempt}"
        )
    if state.last_split is not None:
        # The trial in progress has no split yet: the last finished one's.
        grid.add_row("phases", phases_text(state.last_split))
    if state.last_exchanges is not None:
        # Likewise: the client reports its exchanges when its trial ends.
        grid.add_row("exchanges", exchanges_text(state.last_exchanges))
    if state.search is not None:
        grid.add_row("search", search_text(state.search))
    meter = state.meter
    if meter is not None:
        grid.add_row(
            "meter",
            f"{meter.source}, {meter.sample_rate_hz:.0f} samples/s, CRC errors {meter.crc_errors}, "
            f"gaps {meter.frame_gaps}, dropped {meter.samples_dropped}",
        )
    if state.power:
        powers = [p for _t, p in state.power]
        span_s = state.power[-1][0] - state.power[0][0]
        grid.add_row("power", f"{sparkline(powers, 40)} {powers[-1]:.0f} mW (last {span_s:.0f} s)")
    for role, status in sorted(state.nodes.items()):
        grid.add_row(role, status)
    if state.notice:
        grid.add_row("note", Text(state.notice, style="yellow"))
    return grid


def render(state: SweepState) -> RenderableType:
    header = Text.assemble(
        ("h2iot sweep ", "bold"),
        f"{state.done_trials}/{state.total_trials} trials, "
        f"{state.failed_attempts} failed attempts, ETA {_duration(state.eta_s)}  ",
        (state.run_dir, "dim"),
    )
    return Panel(Group(header, _status(state), _results_table(state)), title="h2iot")
