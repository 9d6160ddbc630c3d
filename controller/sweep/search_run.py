"""A breakdown search run: the planner (`controller.sweep.breakdown`) driving the sweep engine.

Each point of the sweep's axes is a *group*; in each, in order, the planner asks for trials at
values of `[search] param`, and each is an ordinary trial of the engine (retried, recorded in
trials.csv with its `search_group` and `search_probe`, its power trace saved) whose score is the
row's `metric` (divided by its `relative_to`). Every decided probe is logged (`search_probe`);
each finished group rewrites `breakdown.csv` (BREAKDOWN_COLUMNS). A trial that fails every
attempt gives its group up (status "failed"), or, with `failed_trial = "fails"`, fails its probe
(a stream that cannot deliver a huge payload before the trial's timeout has broken down); a pause
stops the search where it is.

Resuming replays the ok rows of trials.csv through the planner, which is a pure function of the
scores it was fed: the search continues where it stopped, with the same trial ids.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agent.workloads import SPECS
from analysis.columns import BREAKDOWN
from controller.config.model import Config, Point, SearchConfig, TrialPoint
from controller.dashboard.state import DashboardEvent, Notice, SearchProgress
from controller.sweep.breakdown import (
    Breakdown,
    Probe,
    SearchSpec,
    SearchState,
    start,
    value_text,
)
from controller.sweep.engine import SweepEngine, SweepOutcome
from controller.sweep.errors import SweepError
from controller.sweep.plan import PlannedTrial

BREAKDOWN_COLUMNS = (
    "param",  # the searched parameter's name
    "status",  # found, below_low, above_high, or failed (a trial failed every attempt)
    "breakdown",  # the bracket's geometric middle (an end when the bracket is open)
    "passing",  # the last passing probe's value (the bracket's low end), empty if none
    "failing",  # the first failing probe's value above it (the high end), empty if none
    "passing_n",
    "passing_mean",  # its scores' mean and t-interval at run.confidence
    "passing_ci_low",
    "passing_ci_high",
    "failing_n",
    "failing_mean",
    "failing_ci_low",
    "failing_ci_high",
    "mb_s",  # breakdown x unit_bytes x mean relative_to / 1e6, empty without unit_bytes
    "mb_s_passing",
    "mb_s_failing",
    "probes",
    "forced_probes",  # probes the mean decided at max_repetitions (not significant)
    "unfinished_probes",  # probes failed by a trial that failed every attempt
    "trials",
    "probe_values",  # each probe as value:verdict, in order
    "error",
)


class ScoreError(ValueError):
    """A trial's row lacks the metric the search compares (or its reference is zero)."""


def search_spec(config: Config) -> SearchSpec:
    search = _search(config)
    param = SPECS[config.workload.kind].param(search.param)
    return SearchSpec(
        low=search.low,
        high=search.high,
        threshold=search.threshold,
        holds=search.holds,
        repetitions=search.repetitions,
        max_repetitions=search.max_repetitions,
        resolution=search.resolution,
        confidence=config.run.confidence,
        integer=param.kind == "int",
    )


def _search(config: Config) -> SearchConfig:
    if not isinstance(config.search, SearchConfig):
        raise ValueError("the config has no breakdown [search]")
    return config.search


def search_axes(config: Config) -> tuple[str, ...]:
    """The run's axes: the searched parameter first (the report's figures put the first
    numeric axis on x, one series per group), then the sweep's (the groups)."""
    return (_search(config).param, *config.sweep.names)


def _probe_value(spec: SearchSpec, value: float) -> int | float:
    return int(value) if spec.integer else value


def probe_point(config: Config, spec: SearchSpec, group: Point, value: float) -> TrialPoint:
    """A probe's trial point: the searched parameter at `value`, then the group's axes."""
    return config.point(((_search(config).param, _probe_value(spec, value)), *group))


def first_point(config: Config) -> TrialPoint:
    """The search's first trial's point: where the server starts (the idle baseline's)."""
    spec = search_spec(config)
    return probe_point(config, spec, config.sweep.points()[0], spec.low)


def trials_bound(config: Config) -> int:
    """Most trials the search can run: the dashboard's total (the ETA's upper bound)."""
    spec = search_spec(config)
    return config.sweep.size * spec.max_probes() * spec.max_repetitions


def _number(value: object) -> float:
    if isinstance(value, str):
        value = value.strip()
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def score_of(row: Mapping[str, object], search: SearchConfig) -> float:
    """The row's metric, over its `relative_to` when there is one (trials.csv strings or the
    engine's numbers alike)."""
    metric = _number(row.get(search.metric))
    if not math.isfinite(metric):
        raise ScoreError(f"trial {row.get('trial_id')} has no {search.metric}")
    if search.relative_to is None:
        return metric
    reference = _number(row.get(search.relative_to))
    if not math.isfinite(reference) or reference == 0:
        raise ScoreError(
            f"trial {row.get('trial_id')} has no nonzero {search.relative_to} to divide by"
        )
    return metric / reference


def trial_id(group: int, probe: int, repetition: int) -> str:
    return f"g{group:03d}p{probe:02d}r{repetition:02d}"


@dataclass(frozen=True)
class GroupResult:
    index: int  # from 1
    group: Point
    breakdown: Breakdown | None  # None: the group was given up
    reference_mean: float  # mean of `relative_to` over the group's trials (NaN without one)
    error: str = ""

    @property
    def status(self) -> str:
        return "failed" if self.breakdown is None else self.breakdown.status


def _cell(value: float | None) -> object:
    return "" if value is None or not math.isfinite(value) else round(value, 9)


def _probe_cells(probe: Probe | None) -> list[object]:
    if probe is None:
        return ["", "", "", ""]
    s = probe.summary
    return [s.n, _cell(s.mean), _cell(s.ci_low), _cell(s.ci_high)]


def breakdown_csv(results: Sequence[GroupResult], axes: Sequence[str], search: SearchConfig) -> str:
    """breakdown.csv's text: a row per group searched so far, the group's axis values first."""

    def mb_s(value: float | None, reference: float) -> object:
        if value is None or search.unit_bytes is None:
            return ""
        return _cell(value * search.unit_bytes * reference / 1e6)

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow((*axes, *BREAKDOWN_COLUMNS))
    for result in results:
        found = result.breakdown
        values = [value for _name, value in result.group]
        if found is None:
            writer.writerow(
                (
                    *values,
                    search.param,
                    "failed",
                    *[""] * (len(BREAKDOWN_COLUMNS) - 3),
                    result.error,
                )
            )
            continue
        passing = found.passing.value if found.passing else None
        failing = found.failing.value if found.failing else None
        reference = result.reference_mean
        writer.writerow(
            (
                *values,
                search.param,
                found.status,
                _cell(found.estimate),
                _cell(passing),
                _cell(failing),
                *_probe_cells(found.passing),
                *_probe_cells(found.failing),
                mb_s(found.estimate, reference),
                mb_s(passing, reference),
                mb_s(failing, reference),
                len(found.probes),
                sum(probe.forced for probe in found.probes),
                sum(probe.unfinished for probe in found.probes),
                found.trials,
                " ".join(f"{value_text(p.value)}:{p.verdict.value}" for p in found.probes),
                result.error,
            )
        )
    return buffer.getvalue()


class BreakdownRun:
    """One search run over its groups, on an engine that runs and records the trials."""

    def __init__(
        self,
        engine: SweepEngine,
        config: Config,
        post: Callable[[DashboardEvent], None],
    ) -> None:
        self.engine = engine
        self.search = _search(config)
        self.spec = search_spec(config)
        self.config = config
        self.groups = config.sweep.points()
        self.axes = config.sweep.names
        self.post = post
        self.results: list[GroupResult] = []
        self._index = 0

    def run(self) -> SweepOutcome:
        """Search every group not yet done; `results` then holds one per group searched."""
        recorder = self.engine.recorder
        rows = recorder.rows()
        attempts: dict[str, int] = {}
        for row in rows:
            attempts[row["trial_id"]] = attempts.get(row["trial_id"], 0) + 1
        self._index = len(rows)
        results = self.results = []
        failed: list[str] = []
        paused: str | None = None
        try:
            for index, group in enumerate(self.groups, start=1):
                result = self._group(index, group, rows, attempts, failed)
                results.append(result)
                recorder.write_file(
                    BREAKDOWN, breakdown_csv(results, self.axes, self.search).encode()
                )
                recorder.event(
                    "search_group_done", group=dict(group), status=result.status,
                    error=result.error,
                )  # fmt: skip
        except SweepError as exc:
            paused = self.engine.paused(exc)
        completed = sum(1 for row in recorder.rows() if row["status"] == "ok")
        remaining = len(self.groups) - len(results)
        return SweepOutcome(completed, tuple(failed), remaining, paused)

    def _group(
        self,
        index: int,
        group: Point,
        rows: Sequence[Mapping[str, str]],
        attempts: dict[str, int],
        failed: list[str],
    ) -> GroupResult:
        references: list[float] = []
        state = start(self.spec)
        try:
            state = self._replay(state, index, rows, attempts, references)
            while (ask := state.ask()) is not None:
                self._progress(index, group, state)
                repetition = len(state.scores) + 1
                trial = PlannedTrial(
                    trial_id(index, ask.probe, repetition),
                    self._index,
                    index - 1,
                    repetition,
                    probe_point(self.config, self.spec, group, ask.value),
                    probe=(index, ask.probe),
                )
                self._index += 1
                row = self.engine.run_trial(trial, attempts.get(trial.trial_id, 0))
                before = len(state.probes)
                if row is not None:
                    state = self._feed(state, row, references)
                elif self.search.failed_trial == "fails":
                    failed.append(trial.trial_id)
                    state = state.fail_probe()
                else:
                    failed.append(trial.trial_id)
                    return self._given_up(index, group, references, f"{trial.trial_id} failed")
                if len(state.probes) > before:
                    self._decided(index, group, state.probes[-1])
        except ScoreError as exc:
            return self._given_up(index, group, references, str(exc))
        return GroupResult(index, group, state.result(), _mean(references))

    def _replay(
        self,
        state: SearchState,
        index: int,
        rows: Sequence[Mapping[str, str]],
        attempts: Mapping[str, int],
        references: list[float],
    ) -> SearchState:
        """The state the group's recorded trials leave, checked against what the planner asks:
        an ok trial's score, a trial that used up its attempts (under `failed_trial = "fails"`)
        its probe's failure; the first trial neither is runs again."""
        ours = [row for row in rows if row.get("search_group") == str(index)]
        ok = {row["trial_id"]: row for row in ours if row["status"] == "ok"}
        recorded = sorted(
            {row["trial_id"]: row for row in ours}.values(),
            key=lambda row: (int(row["search_probe"]), int(row["repetition"])),
        )
        for row in recorded:
            ask = state.ask()
            value = _number(row.get(self.search.param))
            if ask is None or int(row["search_probe"]) != ask.probe or value != ask.value:
                planned = "nothing more" if ask is None else f"probe {ask.probe} at {ask.value:g}"
                raise SweepError(
                    f"trials.csv: {row['trial_id']} does not replay: the search planned {planned}"
                )
            if row["trial_id"] in ok:
                state = self._feed(state, ok[row["trial_id"]], references)
            elif (
                self.search.failed_trial == "fails"
                and attempts[row["trial_id"]] > self.engine.retries
            ):
                state = state.fail_probe()
            else:
                break
        return state

    def _feed(
        self, state: SearchState, row: Mapping[str, object], references: list[float]
    ) -> SearchState:
        if self.search.relative_to is not None:
            references.append(_number(row.get(self.search.relative_to)))
        return state.feed(score_of(row, self.search))

    def _progress(self, index: int, group: Point, state: SearchState) -> None:
        ask = state.ask()
        assert ask is not None

        def shown(probe: Probe | None) -> int | float | None:
            return None if probe is None else _probe_value(self.spec, probe.value)

        self.post(
            SearchProgress(
                group,
                index,
                len(self.groups),
                ask.probe,
                self.search.param,
                _probe_value(self.spec, ask.value),
                len(state.scores),
                shown(state.passing),
                shown(state.failing),
            )
        )

    def _decided(self, index: int, group: Point, probe: Probe) -> None:
        s = probe.summary
        self.engine.recorder.event(
            "search_probe", group=dict(group), search_group=index, probe=probe.index,
            value=probe.value, verdict=probe.verdict.value, forced=probe.forced, n=s.n,
            mean=s.mean, ci_low=s.ci_low, ci_high=s.ci_high,
        )  # fmt: skip
        where = ", ".join(f"{name}={value}" for name, value in group)
        forced = " (by the mean: the interval holds the threshold)" if probe.forced else ""
        self.post(
            Notice(
                f"search {where}: {self.search.param}={value_text(probe.value)}: "
                f"{probe.verdict.value}, mean {s.mean:.4g} [{s.ci_low:.4g}, {s.ci_high:.4g}] "
                f"over {s.n}{forced}"
            )
        )

    def _given_up(
        self, index: int, group: Point, references: list[float], error: str
    ) -> GroupResult:
        self.post(Notice(f"search group {index} given up: {error}"))
        return GroupResult(index, group, None, _mean(references), error)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan
