"""The sweep's state as the dashboard sees it, and the events that change it.

The sweep engine, the meter reader and node checks run on their own threads; they never touch
the UI. They post events to a queue; the dashboard thread applies them here (pure, testable) and
redraws from the state alone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from controller.config.model import Point

POWER_WINDOW_S = 10.0


@dataclass(frozen=True)
class SweepStarted:
    run_dir: str
    total_trials: int
    done_trials: int
    axes: tuple[str, ...]
    confidence: float
    t_mono_s: float


@dataclass(frozen=True)
class TrialStarted:
    trial_id: str
    point: Point
    repetition: int
    attempt: int


@dataclass(frozen=True)
class TrialFinished:
    trial_id: str
    point: Point
    ok: bool
    error: str | None
    response_s: float | None
    client_cpu_s: float | None
    energy_mj: float | None
    t_mono_s: float
    # Its energy's connect, exchange and close (controller.sweep.phases); None where the
    # client's engine records no phases.
    phases_mj: tuple[float, float, float] | None = None
    # How its exchanges went, for a workload whose record lists them
    # (controller.sweep.exchanges.exchange_tally): ("ok", n), ("failed", n), then each
    # handshake kind's count; None for the others.
    exchanges: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True)
class PowerSamples:
    t_s: tuple[float, ...]  # meter time, seconds
    power_mw: tuple[float, ...]


@dataclass(frozen=True)
class MeterHealth:
    source: str
    sample_rate_hz: float
    crc_errors: int
    frame_gaps: int
    samples_dropped: int


@dataclass(frozen=True)
class NodeStatus:
    role: str
    status: str


@dataclass(frozen=True)
class Notice:
    text: str


@dataclass(frozen=True)
class SearchProgress:
    """A breakdown search's place: which group, which probe, and the bracket so far."""

    group: Point  # the group's values of the sweep's axes
    group_index: int  # from 1
    groups: int
    probe: int  # from 1
    param: str
    value: int | float  # as the trial gets it (a whole number for an integer parameter)
    trials_at_probe: int  # trials done at this probe so far
    passing: int | float | None  # the last passing probe's value, None before one passed
    failing: int | float | None  # the first failing probe's value above it


@dataclass(frozen=True)
class OptimizeProgress:
    """An optimizing search's place: the proposal just decided, the budget, the best so far."""

    proposal: int  # from 1
    point: Point
    status: str  # optimize.csv's: measured, known, failed, skipped
    trials_used: int
    budget: int
    best: tuple[Point, ...]  # the best point (two objectives: the front)
    best_interval: tuple[float, float, float] | None  # one objective: its mean, CI low, high


DashboardEvent = (
    SweepStarted
    | TrialStarted
    | TrialFinished
    | PowerSamples
    | MeterHealth
    | NodeStatus
    | Notice
    | SearchProgress
    | OptimizeProgress
)


@dataclass
class PointResults:
    response_s: list[float] = field(default_factory=list)
    client_cpu_s: list[float] = field(default_factory=list)
    energy_mj: list[float] = field(default_factory=list)
    failed: int = 0


@dataclass
class SweepState:
    run_dir: str = ""
    axes: tuple[str, ...] = ()
    confidence: float = 0.90
    total_trials: int = 0
    done_trials: int = 0
    done_this_session: int = 0
    failed_attempts: int = 0
    started_mono_s: float = 0.0
    last_finished_mono_s: float = 0.0
    current: TrialStarted | None = None
    last_split: TrialFinished | None = None  # the last trial with its energy's phases
    last_exchanges: TrialFinished | None = None  # the last trial that listed its exchanges
    meter: MeterHealth | None = None
    nodes: dict[str, str] = field(default_factory=dict)
    power: deque[tuple[float, float]] = field(default_factory=deque)
    points: dict[Point, PointResults] = field(default_factory=dict)
    notice: str = ""
    search: SearchProgress | OptimizeProgress | None = None

    @property
    def eta_s(self) -> float | None:
        if not self.done_this_session or self.done_trials >= self.total_trials:
            return None
        per_trial = (self.last_finished_mono_s - self.started_mono_s) / self.done_this_session
        return per_trial * (self.total_trials - self.done_trials)


def apply(state: SweepState, event: DashboardEvent) -> None:
    """Fold one event into the state."""
    if isinstance(event, SweepStarted):
        state.run_dir = event.run_dir
        state.total_trials = event.total_trials
        state.done_trials = event.done_trials
        state.axes = event.axes
        state.confidence = event.confidence
        state.started_mono_s = state.last_finished_mono_s = event.t_mono_s
        state.notice = ""
    elif isinstance(event, TrialStarted):
        state.current = event
    elif isinstance(event, TrialFinished):
        _finish(state, event)
    elif isinstance(event, PowerSamples):
        state.power.extend(zip(event.t_s, event.power_mw, strict=True))
        if state.power:
            horizon = state.power[-1][0] - POWER_WINDOW_S
            while state.power and state.power[0][0] < horizon:
                state.power.popleft()
    elif isinstance(event, MeterHealth):
        state.meter = event
    elif isinstance(event, NodeStatus):
        state.nodes[event.role] = event.status
    elif isinstance(event, SearchProgress | OptimizeProgress):
        state.search = event
    else:
        state.notice = event.text


def _finish(state: SweepState, event: TrialFinished) -> None:
    results = state.points.setdefault(event.point, PointResults())
    state.current = None
    if not event.ok:
        results.failed += 1
        state.failed_attempts += 1
        state.notice = f"{event.trial_id} failed: {event.error}"
        return
    state.done_trials += 1
    state.done_this_session += 1
    state.last_finished_mono_s = event.t_mono_s
    if event.phases_mj is not None:
        state.last_split = event
    if event.exchanges is not None:
        state.last_exchanges = event
    for values, value in (
        (results.response_s, event.response_s),
        (results.client_cpu_s, event.client_cpu_s),
        (results.energy_mj, event.energy_mj),
    ):
        if value is not None:
            values.append(value)
