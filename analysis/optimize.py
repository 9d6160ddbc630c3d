"""An optimizing search's result (`optimize.csv`, trials.csv; data/README.md) as the report's
section and figure, and its check against a grid run of the same space.

The best settings are read from the ok trials themselves: per point of the grid the search
measured, each objective's scores (the first over `relative_to` when the search set one) and
their t-interval at the run's confidence. With one objective the best is the point of the
lowest mean, listed with the points whose intervals overlap it (as good as the trials can
tell); with two, the Pareto front by means. A grid run of the same space is checked the same
way: its best point, and where the search's best stands among the grid's own trials.

Each difference the section states (a tied point against the best, the search's best against the
grid's) says whether the trials could see it (analysis.detectability): for an energy objective
not over `relative_to`, a difference within the meter's floor over the two points' trials is one
no number of trials resolves, which the verdicts say rather than "missed" or "tied"; the points
the search decided at the meter's floor (optimize.csv's `at_floor`) are counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from analysis import pareto
from analysis.columns import OPTIMIZE, metric_of
from analysis.detectability import Resolvability, resolvability
from analysis.document import Block, Heading, Paragraph, Table
from analysis.errors import RunFormatError
from analysis.figures import new_figure
from analysis.load import Run, read_events
from analysis.meter_floor import point_floor
from analysis.points import ENERGY_METRICS
from analysis.stats import Summary, summarize

FIGURE_STEM = "search"
Point = tuple[str, ...]  # the point's axis values as trials.csv's text


@dataclass(frozen=True)
class SearchFacts:
    """What the manifest's config says of an optimizing search."""

    objectives: tuple[str, ...]
    relative_to: str | None
    sampler: str
    budget: int
    grid_points: int
    grid_repetitions: int


def search_facts(run: Run) -> SearchFacts | None:
    """None unless the run was an optimizing search."""
    search = run.config.get("search")
    if not isinstance(search, Mapping) or search.get("kind") != "optimize":
        return None
    sweep = run.config.get("sweep", {})
    points = math.prod(len(values) for values in sweep.values()) if sweep else 0
    return SearchFacts(
        objectives=tuple(search["objectives"]),
        relative_to=search.get("relative_to"),
        sampler=str(search.get("sampler", "tpe")),
        budget=int(search["budget"]),
        grid_points=points,
        grid_repetitions=int(run.config.get("run", {}).get("repetitions", 0)),
    )


def read_trace(run: Run) -> pd.DataFrame | None:
    path = run.path / OPTIMIZE
    if not path.exists():
        return None
    trace = pd.read_csv(path, dtype={a: str for a in run.axes}, keep_default_na=False)
    missing = [c for c in ("proposal", *run.axes, "status", "trials_used") if c not in trace]
    if missing:
        raise RunFormatError(f"{path}: column {missing[0]}: missing from the header")
    return trace


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def point_scores(run: Run, facts: SearchFacts) -> dict[Point, list[tuple[float, ...]]]:
    """Each point's scores per ok trial, one per objective, in trials.csv's order."""
    scores: dict[Point, list[tuple[float, ...]]] = {}
    for _, row in run.ok.iterrows():
        values = []
        for index, name in enumerate(facts.objectives):
            value = float(row.get(name, math.nan))
            if index == 0 and facts.relative_to:
                value /= float(row.get(facts.relative_to, math.nan))
            values.append(value)
        if all(math.isfinite(v) for v in values):
            point = tuple(_text(row[axis]) for axis in run.axes)
            scores.setdefault(point, []).append(tuple(values))
    return scores


def intervals(
    scores: Mapping[Point, Sequence[tuple[float, ...]]], confidence: float
) -> dict[Point, tuple[Summary, ...]]:
    return {
        point: tuple(summarize((s[i] for s in values), confidence) for i in range(len(values[0])))
        for point, values in scores.items()
        if values
    }


def point_floor_mj(run: Run, facts: SearchFacts, point: Point) -> float | None:
    """The meter's floor over the point's ok trials in the first objective's unit: None for an
    objective no meter bounds, or one over `relative_to` (a ratio)."""
    if facts.objectives[0] not in ENERGY_METRICS or facts.relative_to:
        return None
    rows = run.ok
    for axis, value in zip(run.axes, point, strict=True):
        rows = rows[rows[axis].map(_text) == value]
    floor = point_floor(run.manifest, rows)
    return None if floor is None else floor.total_mj


def against(
    run: Run, facts: SearchFacts, a: Point, b: Point, measured: Mapping[Point, Sequence[Summary]]
) -> Resolvability:
    """b's first objective against a's, with the larger of their meter floors."""
    floors = [f for f in (point_floor_mj(run, facts, p) for p in (a, b)) if f is not None]
    return resolvability(measured[a][0], measured[b][0], max(floors) if floors else None)


def _label(axes: Sequence[str], point: Point) -> str:
    return ", ".join(f"{a}={v}" for a, v in zip(axes, point, strict=True))


def _interval(s: Summary) -> str:
    if not math.isfinite(s.ci_low):
        return f"{s.mean:.4g} (n = {s.n}, no interval)"
    return f"{s.mean:.4g} [{s.ci_low:.4g}, {s.ci_high:.4g}] (n = {s.n})"


@dataclass(frozen=True)
class GridCheck:
    """A search's best point against a grid run's own trials of the same space."""

    grid: str  # the grid run's name
    grid_best: Point
    grid_best_interval: tuple[Summary, ...]
    found: Point
    found_in_grid: tuple[Summary, ...] | None  # None: the grid never measured it
    same: bool  # the search found the grid's best point
    within: bool  # or one the grid's intervals cannot tell from it
    # The found point against the grid's best in the grid's trials; None: not measured there.
    resolvable: Resolvability | None = None

    @property
    def verdict(self) -> str:
        if self.same:
            return "found the grid's best point"
        if self.resolvable is not None and self.resolvable.verdict == "below_meter_floor":
            return "found a point the meter cannot tell from the grid's best"
        if self.within:
            return "found a point the grid's intervals cannot tell from its best"
        return "missed the grid's best"


def grid_check(search: Run, facts: SearchFacts, grid: Run) -> GridCheck | None:
    """Where the search's best stands in `grid`'s trials (one objective: the lowest mean;
    two: the front, each found point checked against the nearest)."""
    measured = intervals(point_scores(search, facts), search.confidence)
    found = pareto.best(measured)
    grid_measured = intervals(point_scores(grid, facts), grid.confidence)
    grid_best = pareto.best(grid_measured)
    if not found or not grid_best:
        return None
    point, best = found[0], grid_best[0]
    in_grid = grid_measured.get(point)
    within = in_grid is not None and point in (best, *pareto.tied(best, grid_measured))
    resolvable = None if in_grid is None else against(grid, facts, best, point, grid_measured)
    return GridCheck(
        grid.name, best, grid_measured[best], point, in_grid, point == best, within, resolvable
    )


def _stopped(run: Run) -> str:
    done = [e for e in read_events(run.path) if e.get("event") == "search_done"]
    return str(done[-1].get("reason", "")) if done else "not finished"


_REASONS = {
    "budget": "its budget was spent",
    "exhausted": "every point of the grid was decided",
    "converged": "the sampler proposed only decided points",
    "not finished": "it has not finished (paused or stopped)",
}


def optimize_blocks(run: Run, grid: Run | None = None) -> list[Block]:
    """The search's section: the best settings (or the front) with their intervals, the trials
    it took against the grid's, the check against `grid` when given, and the trace."""
    facts = search_facts(run)
    trace = read_trace(run)
    if facts is None or trace is None:
        return []
    axes = run.axes
    measured = intervals(point_scores(run, facts), run.confidence)
    best = pareto.best(measured)
    used = len(run.ok)
    grid_trials = facts.grid_points * facts.grid_repetitions
    objectives = " and ".join(
        f"{name}" + (f" / {facts.relative_to}" if i == 0 and facts.relative_to else "")
        for i, name in enumerate(facts.objectives)
    )
    stopped = _stopped(run)
    blocks: list[Block] = [
        Heading("Optimizing search"),
        Paragraph(
            f"The search minimised {objectives} over the grid of {facts.grid_points} points "
            f"({', '.join(axes)}) with optuna's {facts.sampler} sampler: {used} ok trials in "
            f"{len(trace)} proposals, at {len(measured)} of the grid's points, against "
            f"{grid_trials} for the full grid at run.repetitions = {facts.grid_repetitions} "
            f"({100 * used / grid_trials:.0f} %). It stopped because "
            f"{_REASONS.get(stopped, stopped)}."
            if grid_trials
            else f"The search minimised {objectives}: {used} ok trials in {len(trace)} proposals."
        ),
    ]
    header: tuple[str, ...] = ("point", *(f"{name}, mean [CI]" for name in facts.objectives))
    confidence = f"{run.confidence * 100:g} %"
    if len(facts.objectives) == 1 and best:
        unit = metric_of(facts.objectives[0]).unit if not facts.relative_to else ""
        header = (*header, "against the best")
        rows: list[tuple[str, ...]] = [
            (f"best: {_label(axes, best[0])}", _interval(measured[best[0]][0]), "-")
        ]
        rows += [
            (
                f"tied: {_label(axes, p)}",
                _interval(measured[p][0]),
                against(run, facts, best[0], p, measured).text(unit),
            )
            for p in pareto.tied(best[0], measured)
        ]
        caption = (
            f"The best point (lowest mean) and the points whose {confidence} intervals overlap "
            "it: as good as these trials can tell; against the best, whether the difference is "
            "one these trials or the meter could see (Meter floor)."
        )
    else:
        rows = [(_label(axes, p), *(_interval(s) for s in measured[p])) for p in best]
        caption = f"The Pareto front by means, each with its {confidence} interval."
    blocks.append(Table(header, tuple(rows), caption))
    floored = _at_floor(trace, axes)
    if floored:
        blocks.append(
            Paragraph(
                f"{floored} points were decided at the meter's floor: their intervals were "
                "within what one step of the meter over their trials amounts to, so the search "
                "did not chase a narrower one (optimize.csv's at_floor)."
            )
        )
    if grid is not None:
        blocks += _grid_blocks(run, facts, grid)
    blocks.append(_trace_table(trace, axes, facts))
    return blocks


def _at_floor(trace: pd.DataFrame, axes: Sequence[str]) -> int:
    """The points the search decided at the meter's floor (none in a trace from before it had
    the column)."""
    if "at_floor" not in trace:
        return 0
    return len(trace[trace["at_floor"].astype(str) == "True"][list(axes)].drop_duplicates())


def _grid_blocks(run: Run, facts: SearchFacts, grid: Run) -> list[Block]:
    check = grid_check(run, facts, grid)
    if check is None:
        return [Paragraph(f"Against the grid run {grid.name}: no point with results to compare.")]
    axes = run.axes
    found = (
        "which the grid did not measure"
        if check.found_in_grid is None
        else f"which the grid measured at {_interval(check.found_in_grid[0])}"
    )
    grid_trials = len(grid.ok)
    unit = metric_of(facts.objectives[0]).unit if not facts.relative_to else ""
    return [
        Heading("Against the full grid", 3),
        Paragraph(
            f"The grid run {check.grid} ({grid_trials} ok trials) found its best at "
            f"{_label(axes, check.grid_best)}: {_interval(check.grid_best_interval[0])}. "
            f"The search's best is {_label(axes, check.found)}, {found}: the search "
            f"{check.verdict}, with {len(run.ok)} trials against the grid's {grid_trials}"
            + (
                "."
                if check.resolvable is None
                else f" (the difference: {check.resolvable.text(unit)})."
            )
        ),
    ]


def _trace_table(trace: pd.DataFrame, axes: Sequence[str], facts: SearchFacts) -> Table:
    first = facts.objectives[0]
    rows = []
    for _, line in trace.iterrows():
        mean, low, high = (
            line.get(f"{first}_{part}", "") for part in ("mean", "ci_low", "ci_high")
        )
        result = "" if mean == "" else f"{float(mean):.4g}"
        if result and low != "":
            result += f" [{float(low):.4g}, {float(high):.4g}]"
        rows.append(
            (
                str(line["proposal"]),
                ", ".join(str(line[a]) for a in axes),
                str(line["status"]),
                str(line["trials_added"]),
                str(line["n"]),
                result,
                str(line["trials_used"]),
            )
        )
    return Table(
        ("proposal", ", ".join(axes), "status", "trials", "n", f"{first} so far", "trials used"),
        tuple(rows),
        "The search's trace (optimize.csv): each proposal of the sampler, what it cost and "
        "the point's interval after it.",
    )


def figure_search(run: Run, grid: Run | None = None) -> Figure | None:
    """One objective: the best mean so far against trials used, the grid's best as a band;
    two: every measured point's means, the front marked."""
    facts = search_facts(run)
    trace = read_trace(run)
    if facts is None or trace is None or trace.empty:
        return None
    first = facts.objectives[0]
    if len(facts.objectives) == 2:
        return _figure_front(run, facts)
    figure = new_figure(6.0, 3.6)
    ax = figure.add_subplot()
    best: list[tuple[int, float]] = []
    lowest = math.inf
    for _, line in trace.iterrows():
        mean = line.get(f"{first}_mean", "")
        if mean != "" and line["status"] != "failed":
            lowest = min(lowest, float(mean))
        if math.isfinite(lowest):
            best.append((int(line["trials_used"]), lowest))
    if best:
        ax.step(*zip(*best, strict=True), where="post", label="search: best mean so far")
    if grid is not None:
        check = grid_check(run, facts, grid)
        if check is not None:
            s = check.grid_best_interval[0]
            ax.axhspan(s.ci_low, s.ci_high, color="0.85", label=f"grid's best ({s.n} trials each)")
            ax.axhline(s.mean, color="0.5", linewidth=0.8)
    ax.set_xlabel("trials used")
    ax.set_ylabel(first + (f" / {facts.relative_to}" if facts.relative_to else ""))
    ax.legend(fontsize=7)
    ax.set_title("Optimizing search: the best so far", fontsize=9)
    return figure


def _figure_front(run: Run, facts: SearchFacts) -> Figure:
    measured = intervals(point_scores(run, facts), run.confidence)
    front = set(pareto.best(measured))
    figure = new_figure(6.0, 4.0)
    ax = figure.add_subplot()
    for on, color, marker in ((False, "0.6", "o"), (True, "C3", "D")):
        chosen = [s for p, s in measured.items() if (p in front) == on]
        if chosen:
            ax.scatter(
                [s[0].mean for s in chosen], [s[1].mean for s in chosen], color=color,
                marker=marker, label="front" if on else "measured", zorder=3 if on else 2,
            )  # fmt: skip
    ax.set_xlabel(facts.objectives[0])
    ax.set_ylabel(facts.objectives[1])
    ax.legend(fontsize=7)
    ax.set_title("Optimizing search: points measured and the Pareto front", fontsize=9)
    return figure
