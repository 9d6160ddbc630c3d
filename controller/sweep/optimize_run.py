"""An optimising search run: optuna's sampler proposing points of the sweep's grid, the rules of
controller.sweep.optimize deciding how many trials each gets, the sweep engine running them.

Each proposal is one optuna trial: a value per axis of [sweep] (categorical), told the point's means
once its rounds are done. A point measured before is measured again only while it still needs more
repetitions; a point that needs none costs no trial (the sampler is told what is known); a point
whose energy interval is within the meter's floor is decided (`at_floor`: no number of trials tells
apart points closer than that). The search stops when the budget is spent, when every point of the
grid is decided, or when the sampler has proposed only decided points `idle_limit` times in a row
(it has converged). Each trial is an ordinary trial of the engine (retried, recorded in trials.csv
with `search_group` 1 and `search_probe` its proposal, its power trace saved); a trial that fails
every attempt fails its point, which is not proposed again.

optimize.csv (OPTIMIZE_COLUMNS, objectives' columns named after them) is the search's trace,
one row per proposal, rewritten after each; events.jsonl has `search_candidate` per proposal
and `search_done` with why it stopped.

Resuming replays trials.csv: the seeded sampler proposes the same points when told the same
means, so each proposal's recorded trials are fed back (their ids name proposal and repetition)
and the search continues where it stopped.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis import pareto
from analysis.columns import OPTIMIZE
from analysis.stats import Summary
from controller.config.model import AxisValue, Config, OptimizeConfig, Point
from controller.dashboard.state import DashboardEvent, Notice, OptimizeProgress
from controller.sweep.engine import SweepEngine, SweepOutcome
from controller.sweep.errors import SweepError
from controller.sweep.optimize import (
    OptimizeSpec,
    Scores,
    at_floor,
    forced,
    needs_more,
    summaries,
)
from controller.sweep.plan import PlannedTrial
from controller.sweep.search_run import ScoreError, trial_id

OPTIMIZE_COLUMNS = (
    "proposal",  # from 1, in the sampler's order
    # then the point's value of each axis of [sweep]
    "status",  # measured (trials run), known (decided before: no trial), failed, skipped
    "trials_added",  # trials this proposal ran
    "n",  # ok trials at the point so far
    # then per objective: <objective>_mean, _ci_low, _ci_high over the point's trials so far
    "forced",  # at max_repetitions still indistinct from a rival: its place is its mean's
    "at_floor",  # decided because its interval is within the meter's floor (energy objectives)
    "trials_used",  # the search's trials after this proposal
    "best",  # the best point so far (two objectives: the front), as axis=value pairs
)
IDLE_LIMIT = 25  # proposals in a row of decided points: the sampler has converged


class StudyExtraMissing(SweepError):
    """optuna (the `study` extra) is not installed."""


def optimize_spec(config: Config) -> OptimizeSpec:
    search = _search(config)
    return OptimizeSpec(
        objectives=search.objectives,
        budget=search.budget,
        repetitions=search.repetitions,
        max_repetitions=search.max_repetitions,
        confidence=config.run.confidence,
        tolerance=search.tolerance,
    )


def _search(config: Config) -> OptimizeConfig:
    if not isinstance(config.search, OptimizeConfig):
        raise ValueError("the config has no optimizing [search]")
    return config.search


def grid_trials(config: Config) -> int:
    """What the full grid of the same space costs at run.repetitions."""
    return config.sweep.size * config.run.repetitions


def point_text(point: Point) -> str:
    return ", ".join(f"{name}={value}" for name, value in point)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def scores_of(row: Mapping[str, object], search: OptimizeConfig) -> Scores:
    """The row's objectives, the first over its `relative_to` when there is one."""
    values = []
    for index, name in enumerate(search.objectives):
        value = _number(row.get(name))
        if not math.isfinite(value):
            raise ScoreError(f"trial {row.get('trial_id')} has no {name}")
        if index == 0 and search.relative_to is not None:
            reference = _number(row.get(search.relative_to))
            if not math.isfinite(reference) or reference == 0:
                raise ScoreError(
                    f"trial {row.get('trial_id')} has no nonzero {search.relative_to} to divide by"
                )
            value /= reference
        values.append(value)
    return tuple(values)


def _sampler(optuna: Any, search: OptimizeConfig, seed: int) -> Any:
    samplers = optuna.samplers
    if search.sampler == "nsga2":
        return samplers.NSGAIISampler(seed=seed)
    if search.sampler == "random":
        return samplers.RandomSampler(seed=seed)
    return samplers.TPESampler(seed=seed)


@dataclass
class _Book:
    """What the search has measured: each point's scores, the failed points, the trace."""

    scores: dict[Point, list[Scores]]
    failed: set[Point]
    trace: list[list[object]]
    used: int = 0  # trials planned so far
    # Each point's ok rows: their windows and samples give its meter floor.
    rows: dict[Point, list[Mapping[str, object]]] = field(default_factory=dict)


class OptimizeRun:
    """One optimising search over the sweep's grid, on an engine that runs and records trials."""

    def __init__(
        self,
        engine: SweepEngine,
        config: Config,
        post: Callable[[DashboardEvent], None],
    ) -> None:
        try:
            import optuna  # noqa: PLC0415  (the `study` extra)
        except ImportError:
            raise StudyExtraMissing(
                "an optimizing search needs the study extra: pip install 'h2iot[study]'"
            ) from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.engine = engine
        self.search = _search(config)
        self.spec = optimize_spec(config)
        self.config = config
        self.axes: tuple[tuple[str, tuple[AxisValue, ...]], ...] = config.sweep.axes
        self.grid = config.sweep.size
        self.seed = config.run.seed
        self.post = post
        self.book = _Book({}, set(), [])
        self.stopped = ""  # why the search ended: budget, exhausted, converged

    def run(self) -> SweepOutcome:
        recorder = self.engine.recorder
        rows = recorder.rows()
        ok = {row["trial_id"]: row for row in rows if row["status"] == "ok"}
        attempts = Counter(row["trial_id"] for row in rows)
        self._index = len(rows)
        optuna = self._optuna
        study = optuna.create_study(
            sampler=_sampler(optuna, self.search, self.seed),
            directions=["minimize"] * len(self.spec.objectives),
        )
        failed: list[str] = []
        paused: str | None = None
        idle = 0
        proposal = 0
        try:
            while not self.stopped:
                proposal += 1
                asked = study.ask()
                point: Point = tuple(
                    (name, asked.suggest_categorical(name, list(values)))
                    for name, values in self.axes
                )
                before = self.book.used
                status = self._propose(proposal, point, ok, attempts, failed)
                if status == "failed" or point in self.book.failed:
                    study.tell(asked, state=optuna.trial.TrialState.FAIL)
                else:
                    means = [s.mean for s in self._summaries(point)]
                    study.tell(asked, means[0] if len(means) == 1 else means)
                idle = 0 if status in ("measured", "failed") else idle + 1
                self._record(proposal, point, status, self.book.used - before)
                self.stopped = self._stop(idle)
        except SweepError as exc:
            paused = self.engine.paused(exc)
        if not paused:
            best = self._best()
            recorder.event(
                "search_done", reason=self.stopped, trials=self.book.used,
                proposals=proposal, best=[dict(point) for point in best],
            )  # fmt: skip
            self.post(Notice(f"search done ({self.stopped}) after {self.book.used} trials"))
        completed = sum(1 for row in recorder.rows() if row["status"] == "ok")
        remaining = 0 if paused is None else max(self.spec.budget - self.book.used, 0)
        return SweepOutcome(completed, tuple(failed), remaining, paused)

    def _propose(
        self,
        proposal: int,
        point: Point,
        ok: Mapping[str, Mapping[str, str]],
        attempts: Counter[str],
        failed: list[str],
    ) -> str:
        """Runs the point's rounds; how the proposal went (OPTIMIZE_COLUMNS' status)."""
        book = self.book
        if point in book.failed:
            return "skipped"
        scores = book.scores.setdefault(point, [])
        trial_point = self.config.point(point)
        ran = False
        while book.used < self.spec.budget and needs_more(
            point, self._measured(), len(scores), self.spec, self._floors(point)
        ):
            rounds = min(
                self.spec.repetitions,
                self.spec.max_repetitions - len(scores),
                self.spec.budget - book.used,
            )
            for _ in range(rounds):
                ran = True
                repetition = len(scores) + 1
                trial = PlannedTrial(
                    trial_id(1, proposal, repetition), self._index, 0, repetition, trial_point,
                    probe=(1, proposal),
                )  # fmt: skip
                self._index += 1
                book.used += 1
                row = self._trial(trial, ok, attempts)
                if row is None:
                    failed.append(trial.trial_id)
                    book.failed.add(point)
                    del book.scores[point]
                    return "failed"
                try:
                    scores.append(scores_of(row, self.search))
                    book.rows.setdefault(point, []).append(row)
                except ScoreError as exc:
                    self.post(Notice(f"search: {exc}: the point is given up"))
                    book.failed.add(point)
                    del book.scores[point]
                    return "failed"
        if not scores:
            del book.scores[point]
        return "measured" if ran else "known"

    def _trial(
        self, trial: PlannedTrial, ok: Mapping[str, Mapping[str, str]], attempts: Counter[str]
    ) -> Mapping[str, object] | None:
        """The trial's recorded ok row, if it has one (checked to be at its point), None when
        its recorded attempts are used up, else the row of running it now."""
        recorded = ok.get(trial.trial_id)
        if recorded is not None:
            for name, value in trial.point.axes:
                if recorded.get(name) != str(value) and _number(recorded.get(name)) != value:
                    raise SweepError(
                        f"trials.csv: {trial.trial_id} does not replay: it ran at "
                        f"{name}={recorded.get(name)}, the search now proposes {value}"
                    )
            return recorded
        if attempts[trial.trial_id] > self.engine.retries:
            return None
        return self.engine.run_trial(trial, attempts[trial.trial_id])

    def _measured(self) -> dict[Point, tuple[Summary, ...]]:
        return {
            point: summaries(scores, self.spec)
            for point, scores in self.book.scores.items()
            if scores
        }

    def _floors(self, point: Point) -> tuple[float, ...]:
        """The point's meter floor per objective (0 for one no meter bounds, and for the first
        over its `relative_to`: a ratio has no floor in the meter's unit)."""
        rows = self.book.rows.get(point, [])
        return tuple(
            0.0
            if index == 0 and self.search.relative_to is not None
            else self.engine.floor_mj(name, rows)
            for index, name in enumerate(self.spec.objectives)
        )

    def _summaries(self, point: Point) -> tuple[Summary, ...]:
        return summaries(self.book.scores[point], self.spec)

    def _best(self) -> list[Point]:
        """With one objective the point of the lowest mean, with two the front."""
        return pareto.best(self._measured())

    def _stop(self, idle: int) -> str:
        if self.book.used >= self.spec.budget:
            return "budget"
        measured = self._measured()
        decided = all(
            not needs_more(
                point, measured, len(self.book.scores[point]), self.spec, self._floors(point)
            )
            for point in measured
        )
        if len(measured) + len(self.book.failed) >= self.grid and decided:
            return "exhausted"
        return "converged" if idle >= IDLE_LIMIT else ""

    def _record(self, proposal: int, point: Point, status: str, added: int) -> None:
        book = self.book
        cells: list[object] = []
        n = 0
        is_forced = floored = False
        if point in book.scores:
            n = len(book.scores[point])
            own = self._summaries(point)
            for s in own:
                cells += [_cell(s.mean), _cell(s.ci_low), _cell(s.ci_high)]
            floors = self._floors(point)
            is_forced = forced(point, self._measured(), n, self.spec, floors)
            floored = at_floor(own, self.spec, floors)
        else:
            cells = [""] * (3 * len(self.spec.objectives))
        if floored and status == "measured":
            self.post(
                Notice(
                    f"search {point_text(point)}: decided at the meter's floor (±"
                    f"{max(floors):.3g} mJ) after {n} trials: no interval narrower is worth trials"
                )
            )
        best = self._best()
        row = [
            proposal, *[value for _name, value in point], status, added, n, *cells, is_forced,
            floored, book.used,
            "; ".join(point_text(p) for p in best),
        ]  # fmt: skip
        book.trace.append(row)
        recorder = self.engine.recorder
        recorder.write_file(OPTIMIZE, trace_csv(book.trace, self.axes, self.spec).encode())
        recorder.event(
            "search_candidate", proposal=proposal, point=dict(point), status=status, n=n,
            at_floor=floored, trials_used=book.used,
        )  # fmt: skip
        self.post(
            OptimizeProgress(
                proposal, point, status, book.used, self.spec.budget,
                tuple(best), self._best_summary(best),
            )
        )  # fmt: skip

    def _best_summary(self, best: Sequence[Point]) -> tuple[float, float, float] | None:
        if len(self.spec.objectives) != 1 or not best:
            return None
        s = self._summaries(best[0])[0]
        return (s.mean, s.ci_low, s.ci_high)


def _cell(value: float) -> object:
    return round(value, 9) if math.isfinite(value) else ""


def trace_csv(
    trace: Sequence[Sequence[object]],
    axes: Sequence[tuple[str, Sequence[AxisValue]]],
    spec: OptimizeSpec,
) -> str:
    """optimize.csv's text: OPTIMIZE_COLUMNS with the axes and each objective's columns."""
    objective_columns = [
        f"{name}_{part}" for name in spec.objectives for part in ("mean", "ci_low", "ci_high")
    ]
    header = (
        "proposal", *[name for name, _values in axes], "status", "trials_added", "n",
        *objective_columns, "forced", "at_floor", "trials_used", "best",
    )  # fmt: skip
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(trace)
    return buffer.getvalue()
