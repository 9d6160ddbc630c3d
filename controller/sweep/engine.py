"""The sweep engine: runs planned trials one at a time and records each before the next.

Per trial: the server agent serves the trial's grid point, the meter is told a trial begins,
the client agent runs one unit of the workload (a page fetch by default), the trial's power
window is cut out (marker edges, else the client's clock mapped onto the controller's), energy
is integrated, the server's own record is fetched, and the trace then the row are made durable
(trace first: an ok row always has its trace). A failed trial (body mismatch, timeout, agent
error) is recorded with its reason and retried; a lost node or meter pauses the sweep,
resumable. A full disk stops it (`RunDiskFull`, not a pause): no trial starts that could not be
recorded, and a failure the full disk caused is not recorded as the trial's.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.workloads import SPECS
from analysis.meter_floor import trials_floor
from analysis.stopping import settled
from controller.config.model import TrialPoint
from controller.dashboard.state import DashboardEvent, Notice, TrialFinished, TrialStarted
from controller.energy import WindowEnergy, energy_in_window
from controller.run.recorder import RunRecorder
from controller.sweep.errors import SweepError, SweepPaused
from controller.sweep.exchanges import ExchangeEnergy, exchange_energy, exchange_tally
from controller.sweep.interfaces import PowerMeter, PowerWindow, SharedTrials, TrialNodes
from controller.sweep.phases import (
    ClockMap,
    PhaseEnergy,
    clock_map,
    first_byte_s,
    phase_bounds,
    phase_energy,
)
from controller.sweep.plan import PlannedTrial
from controller.sweep.rows import settings_exchange_of, trial_row
from controller.sweep.window import WindowError, trial_span

# How long the server's record may lag behind the client's last byte.
SERVER_RECORD_TIMEOUT_S = 10.0


# The metrics a meter's floor bounds (analysis.points.ENERGY_METRICS, whose module the sweep
# does not import: pandas).
FLOORED_METRICS = ("energy_mj", "energy_above_idle_mj")


@dataclass(frozen=True)
class StopRule:
    """Opt-in early stop: a point stops repeating once the `metric` column's t-interval
    half-width is at most `relative_half_width` x its mean, or the meter's floor over the
    point's trials when that is larger (an energy metric), with at least `min_n` values."""

    metric: str
    relative_half_width: float
    min_n: int
    confidence: float


@dataclass(frozen=True)
class SweepOutcome:
    completed: int  # trials with an ok row, this session and before
    failed_trials: tuple[str, ...]  # trials that used up their attempts this session
    remaining: int  # planned trials still to run (neither done nor stopped early)
    paused: str | None  # why the sweep paused, None when it ran to the end
    stopped_early: int = 0  # trials skipped because their point had settled


@dataclass(frozen=True)
class _Attempt:
    error: str | None
    client: Mapping[str, Any] | None
    server: Mapping[str, Any] | None
    power: PowerWindow | None
    energy: WindowEnergy | None
    phases: PhaseEnergy | None = None  # None where the client's engine records no phases
    exchanges: ExchangeEnergy | None = None  # a workload whose record lists its exchanges


class SweepEngine:
    def __init__(
        self,
        *,
        recorder: RunRecorder,
        nodes: TrialNodes,
        meter: PowerMeter,
        idle_mw: float,
        retries: int,
        trial_timeout_s: float,
        post: Callable[[DashboardEvent], None],
        stop: threading.Event | None = None,
        stop_rule: StopRule | None = None,
        energy_window: str = "fetch",
        meter_resolution: Mapping[str, Any] | None = None,
    ) -> None:
        self.recorder = recorder
        self.nodes = nodes
        self.meter = meter
        self.idle_mw = idle_mw
        self.retries = retries
        self.trial_timeout_s = trial_timeout_s
        self.post = post
        self.stop = stop or threading.Event()
        self.stop_rule = stop_rule
        self.energy_window = energy_window  # [energy] window: "fetch" or "process"
        # The manifest's `meter.resolution` (analysis.meter_floor.resolution_record): what the
        # early stop and the search never aim below; None when the meter states none.
        self.meter_resolution = meter_resolution

    def run(self, plan: Sequence[PlannedTrial], shared: SharedTrials | None = None) -> SweepOutcome:
        """The plan's trials not done yet, in order; with `shared`, those this bench takes of a
        study it shares with other benches (the stop rule is not theirs: the config refuses it)."""
        rows = self.recorder.rows()
        done = {row["trial_id"] for row in rows if row["status"] == "ok"}
        attempts = Counter(row["trial_id"] for row in rows)
        metric = self.stop_rule.metric if self.stop_rule else None
        trials: dict[TrialPoint, list[Mapping[str, object]]] = {}
        point_of = {trial.trial_id: trial.point for trial in plan}
        for row in rows:
            if metric and row["status"] == "ok" and row.get(metric) and row["trial_id"] in point_of:
                trials.setdefault(point_of[row["trial_id"]], []).append(row)
        failed: list[str] = []
        settled_points: set[TrialPoint] = set()
        skipped = 0
        paused: str | None = None
        taken: PlannedTrial | None = None  # a shared trial this bench holds
        try:
            for trial in plan if shared is None else shared.claimed(plan):
                if trial.trial_id in done:
                    if shared is not None:  # its row was written, the study not told: now
                        shared.finished(trial, {})
                    continue
                if self._settled(trial, trials.get(trial.point, []), settled_points):
                    skipped += 1
                    continue
                taken = trial
                recorded = self.run_trial(trial, attempts[trial.trial_id])
                if shared is not None:
                    shared.finished(trial, recorded)
                taken = None
                if recorded is None:
                    failed.append(trial.trial_id)
                    continue
                done.add(trial.trial_id)
                value = recorded.get(metric) if metric else None
                if isinstance(value, int | float):
                    trials.setdefault(trial.point, []).append(recorded)
        except SweepError as exc:
            if shared is not None and taken is not None:
                shared.released(taken)
            paused = self.paused(exc)
        if shared is not None:
            return SweepOutcome(len(done), tuple(failed), shared.remaining(), paused)
        remaining = sum(1 for trial in plan if trial.trial_id not in done) - skipped
        return SweepOutcome(len(done), tuple(failed), remaining, paused, skipped)

    def _settled(
        self,
        trial: PlannedTrial,
        trials: list[Mapping[str, object]],
        settled_points: set[TrialPoint],
    ) -> bool:
        rule = self.stop_rule
        if rule is None:
            return False
        if trial.point in settled_points:
            return True
        values = [float(str(row[rule.metric])) for row in trials]
        floor = self.floor_mj(rule.metric, trials)
        point = settled(values, rule.confidence, rule.relative_half_width, rule.min_n, floor)
        if point is None:
            return False
        settled_points.add(trial.point)
        settings = ", ".join(f"{name}={value}" for name, value in trial.point.axes)
        self.recorder.event("point_stopped", point=dict(trial.point.axes), n=point.n,
                            metric=rule.metric, half_width=point.half_width,
                            target_half_width=point.target_half_width, floor=point.floor,
                            by_floor=point.by_floor)  # fmt: skip
        why = (
            f" at the meter's floor (±{point.floor:.3g} mJ: no interval narrower is worth trials)"
            if point.by_floor
            else ""
        )
        self.post(Notice(f"{settings}: {rule.metric} settled after {point.n} trials{why}"))
        return True

    def floor_mj(self, metric: str, trials: Sequence[Mapping[str, object]]) -> float:
        """The meter's floor over a point's ok trials for `metric`: 0 for a metric no meter
        bounds, or a meter that states no resolution."""
        if metric not in FLOORED_METRICS:
            return 0.0
        floor = trials_floor(self.meter_resolution, trials)
        return 0.0 if floor is None else floor.total_mj

    def paused(self, exc: SweepError) -> str:
        """Why the sweep pauses on `exc`, logged (`sweep_paused`). A node or meter lost to a full
        disk (its logs, the meter's ground truth) raises RunDiskFull instead: the disk is what
        to report, and what must be fixed before resuming."""
        self.recorder.check_space()
        reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, SweepPaused) else str(exc)
        self.recorder.event("sweep_paused", reason=reason)
        return reason

    def run_trial(self, trial: PlannedTrial, previous_attempts: int) -> Mapping[str, object] | None:
        """One trial, retried as the config allows: its ok row, or None when every attempt
        failed. SweepPaused when a stop was asked for before it started."""
        if self.stop.is_set():
            raise SweepPaused("stopped on request")
        for attempt in range(previous_attempts + 1, previous_attempts + self.retries + 2):
            self.recorder.check_space()
            self.post(TrialStarted(trial.trial_id, trial.point.axes, trial.repetition, attempt))
            self.recorder.event("trial_started", trial_id=trial.trial_id, attempt=attempt)
            result = self._attempt(trial)
            if result.error is not None:
                # An agent that could not write its log fails the trial: the disk's fault,
                # not the trial's, so it must not use up one of the trial's attempts.
                self.recorder.check_space()
            row = trial_row(
                trial,
                attempt,
                error=result.error,
                client=result.client,
                server=result.server,
                power=result.power,
                energy=result.energy,
                workload=self.recorder.workload,
                bench=self.recorder.bench,
                phases=result.phases,
                exchanges=result.exchanges,
            )
            self._record_settings(trial.trial_id, attempt, result.client)
            if result.error is None:
                for role, data in self.nodes.trial_events(trial.trial_id).items():
                    self.recorder.save_events(trial.trial_id, role, data)
            if result.error is None and result.power is not None:
                window = result.power
                self.recorder.save_power(
                    trial.trial_id, window.t_s - window.start_s, window.power_mw
                )
            self.recorder.append_trial(row)
            client = result.client or {}
            marks = client.get("exchanges")
            self.post(
                TrialFinished(
                    trial.trial_id,
                    trial.point.axes,
                    result.error is None,
                    result.error,
                    client.get("response_s"),
                    client.get("cpu_s"),
                    result.energy.energy_mj if result.energy else None,
                    time.monotonic(),
                    result.phases.energies_mj if result.phases else None,
                    exchange_tally(marks) if isinstance(marks, list) else None,
                )
            )
            if result.error is None:
                return row
            self.recorder.event(
                "trial_failed", trial_id=trial.trial_id, attempt=attempt, error=result.error
            )
        return None

    def _record_settings(
        self, trial_id: str, attempt: int, client: Mapping[str, object] | None
    ) -> None:
        """The client's full announcement and what it received (the row keeps only the
        mismatches and the header tables), as events.jsonl's `settings_in_force`."""
        exchange = None if client is None else settings_exchange_of(client)
        if exchange is not None:
            self.recorder.event(
                "settings_in_force",
                trial_id=trial_id,
                attempt=attempt,
                announced=dict(exchange.announced),
                received=None if exchange.received is None else dict(exchange.received),
            )

    def _attempt(self, trial: PlannedTrial) -> _Attempt:
        self.nodes.ensure_server(trial.point)
        self.meter.begin_trial()
        client = self.nodes.run_trial(trial.trial_id, trial.point, self.trial_timeout_s)
        if not client.get("ok"):
            error = str(client.get("error") or "client agent reported a failure")
            return _Attempt(error, client, None, None, None)
        server = self.nodes.server_trial(trial.trial_id, SERVER_RECORD_TIMEOUT_S)
        if server is None:
            return _Attempt("server agent wrote no record for the trial", client, None, None, None)
        if not server.get("ok"):
            return _Attempt("server agent reports the trial incomplete", client, server, None, None)
        try:
            span = trial_span(client, self.nodes.client_clock_offset_ns(), self.energy_window)
        except WindowError as exc:
            return _Attempt(f"energy window: {exc}", client, server, None, None)
        power = self.meter.window(
            span.start_wall_ns, span.end_wall_ns, before_s=span.before_s, after_s=span.after_s
        )
        if power.clock_reason:
            self.recorder.event(
                "window_by_clock", trial_id=trial.trial_id, reason=power.clock_reason
            )
        try:
            energy = energy_in_window(
                power.t_s, power.power_mw, power.start_s, power.end_s, self.idle_mw
            )
        except ValueError as exc:
            return _Attempt(f"meter trace: {exc}", client, server, power, None)
        # The window's ends before the process window widened them: where the client's clock
        # is known on the meter's.
        clock = clock_map(
            client, power.source, power.start_s + span.before_s, power.end_s - span.after_s
        )
        phases = None
        if clock is not None:
            bounds = phase_bounds(client, clock, power.start_s, power.end_s)
            split = SPECS[self.recorder.workload].exchange_split is not None
            phases = phase_energy(
                power.t_s,
                power.power_mw,
                bounds,
                clock.phase_clock,
                idle_mw=self.idle_mw,
                split_s=first_byte_s(client, clock, bounds) if split else None,
            )
        return _Attempt(
            None,
            client,
            server,
            power,
            energy,
            phases,
            self._exchanges(client, power, energy, clock),
        )

    def _exchanges(
        self,
        client: Mapping[str, Any],
        power: PowerWindow,
        energy: WindowEnergy,
        clock: ClockMap | None,
    ) -> ExchangeEnergy | None:
        """The trial's energy per exchange, for a workload whose record lists its exchanges:
        integrated from the window already held, a span at a time
        (controller.sweep.exchanges)."""
        marks = client.get("exchanges")
        if not SPECS[self.recorder.workload].exchange_marks or not isinstance(marks, list):
            return None
        return exchange_energy(
            marks,
            energy.energy_mj,
            energy.energy_above_idle_mj,
            trace=(power.t_s, power.power_mw, power.start_s, power.end_s),
            clock=clock,
            idle_mw=self.idle_mw,
        )
