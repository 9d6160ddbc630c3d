"""Several benches sharing one sweep (`h2iot sweep CONFIG --study URL --bench NAME`): the run's
planned trials as a queue in an optuna study, which any number of benches (a controller with
its own nodes and meter each) take trials from until none is left.

optuna coordinates the benches through its RDB storage (an SQLAlchemy URL: `sqlite:///FILE`
on one machine, `postgresql+psycopg://...` for a lab), which makes taking a trial atomic. The
first bench to join creates the study and puts the plan in it, one enqueued optuna trial per
planned trial (its index), then marks it ready; the others wait for that and check they plan
the same trials (the same config and seed), else they are refused in one line. Each bench then
asks for the next waiting trial, in the plan's seeded order, runs it as any sweep does (its
rows in its own run directory) and tells the study how it ended: complete (its energy the
value), or failed after every attempt (not taken again).

A bench that dies mid-trial stops its heartbeat; once the grace period is over, a bench still
working fails that trial for it and enqueues it again, so another bench takes it (optuna's
RetryHeartbeatStaleTrialCallback). optuna never counts a trial as silent before its first
heartbeat, so a bench that died between taking a trial and its first beat would hold it for
ever: a trial another bench has watched run for a grace period gets a heartbeat from it, which
changes nothing while its own bench beats and starts the grace period if that bench is gone.
A bench with nothing left to take waits while others still run trials, since one of them may
die. A trial whose row was written just before its bench
died (before the study heard of it) runs again elsewhere: its rows in two benches' runs carry
the same trial_id, and reading them together keeps the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from controller.errors import ControllerError
from controller.sweep.plan import PlannedTrial

INDEX = "trial_index"  # the optuna parameter holding a planned trial's index
_READY, _PLAN = "h2iot_ready", "h2iot_plan_sha256"
JOIN_TIMEOUT_S = 60.0  # for the creating bench to put the plan in the study
_CREATE_ATTEMPTS = 5


class StudyError(ControllerError):
    """The shared study cannot be joined (storage, another plan, the study extra missing)."""


@dataclass(frozen=True)
class StudyOptions:
    url: str  # SQLAlchemy URL of optuna's storage
    bench: str  # this bench's name, recorded in its run's manifest
    heartbeat_s: int = 10  # how often a bench says it is still at its trial
    # How long a silent trial waits before another bench takes it again.
    grace_s: int = 30


def redacted(url: str) -> str:
    """The storage URL without its password, for manifests and messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def study_facts(options: StudyOptions, name: str) -> dict[str, object]:
    """What a bench's run manifest records of the study it shares."""
    return {
        "name": name,
        "storage": redacted(options.url),
        "bench": options.bench,
        "heartbeat_s": options.heartbeat_s,
        "grace_s": options.grace_s,
    }


def plan_digest(plan: Sequence[PlannedTrial]) -> str:
    """What every bench of a study must plan alike: each trial's id and point, in order."""
    text = json.dumps([[t.trial_id, [list(pair) for pair in t.point.axes]] for t in plan])
    return hashlib.sha256(text.encode()).hexdigest()


class SharedStudy:
    """One bench's side of a shared study: the trials it takes (`claimed`) and what it tells
    of each. The engine (controller.sweep.engine) sees it as `SharedTrials`."""

    def __init__(self, options: StudyOptions, name: str, plan: Sequence[PlannedTrial]) -> None:
        try:
            import optuna  # noqa: PLC0415  (the `study` extra)
        except ImportError:
            raise StudyError("--study needs the study extra: pip install 'h2iot[study]'") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # The heartbeat and its retry are "experimental" to optuna, and it would rather record
        # heartbeats itself in Study.optimize: warnings per bench per run, none of them news.
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
        self.options = options
        self.name = name
        self._optuna = optuna
        self._plan = list(plan)
        self._running: dict[str, Any] = {}  # trial_id -> its optuna trial, while it runs
        self._beating = threading.Event()
        where = redacted(options.url)
        try:
            self._storage = self._open_storage()
            self.study = self._join(name, plan_digest(plan))
        except StudyError:
            raise
        except Exception as exc:  # SQLAlchemy's and the drivers' errors have no common base
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StudyError(f"--study {where}: {reason}") from None

    def _open_storage(self) -> Any:
        """optuna's storage, its tables made if missing. Benches started together race to make
        them (the loser's CREATE TABLE or its schema version's INSERT fails, each database in
        its own words): a second look finds them made."""
        storages = self._optuna.storages
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                return storages.RDBStorage(
                    self.options.url,
                    heartbeat_interval=self.options.heartbeat_s,
                    grace_period=self.options.grace_s,
                    heartbeat_stale_trial_callback=storages.RetryHeartbeatStaleTrialCallback(),
                )
            except Exception:  # SQLAlchemy's OperationalError, IntegrityError, ...
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    def _join(self, name: str, digest: str) -> Any:
        optuna = self._optuna
        try:
            study = optuna.create_study(storage=self._storage, study_name=name)
        except optuna.exceptions.DuplicatedStudyError:
            study = optuna.load_study(storage=self._storage, study_name=name)
            self._wait_ready(study, digest)
            return study
        study.set_user_attr(_PLAN, digest)
        for trial in self._plan:
            study.enqueue_trial({INDEX: trial.index}, user_attrs={"trial_id": trial.trial_id})
        study.set_user_attr(_READY, True)
        return study

    def _wait_ready(self, study: Any, digest: str) -> None:
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while not study.user_attrs.get(_READY):
            if time.monotonic() > deadline:
                raise StudyError(
                    f"--study {redacted(self.options.url)}: study {self.name!r} was created but "
                    f"its plan not put in within {JOIN_TIMEOUT_S:g} s (its bench died?)"
                )
            time.sleep(0.2)
        if study.user_attrs.get(_PLAN) != digest:
            raise StudyError(
                f"--study {redacted(self.options.url)}: study {self.name!r} plans other trials "
                "(another config or seed): give this run its own run.name, or the same config"
            )

    # SharedTrials (controller.sweep.interfaces) --------------------------------------------

    def claimed(self, plan: Sequence[PlannedTrial]) -> Iterator[PlannedTrial]:
        """The trials this bench takes, one at a time, until the study has none waiting and
        none running elsewhere (a running one may yet be given back by its bench's death)."""
        optuna = self._optuna
        states = optuna.trial.TrialState
        by_index = {trial.index: trial for trial in plan}
        watched: dict[int, float | None] = {}  # running elsewhere: since when, None once beaten
        while True:
            optuna.storages.fail_stale_trials(self.study)
            trials = self.study.get_trials(deepcopy=False, states=(states.WAITING, states.RUNNING))
            if not trials:
                return
            if not any(t.state == states.WAITING for t in trials):
                self._beat_for_the_silent(trials, watched)
                time.sleep(self.options.heartbeat_s / 2)
                continue
            with self._claim_lock():
                asked = self.study.ask()
            if "trial_id" not in asked.user_attrs:
                # Another bench took the last waiting trial between the look and the ask.
                self.study.tell(asked, state=states.FAIL)
                continue
            trial = by_index[asked.suggest_int(INDEX, 0, max(by_index))]
            asked.set_user_attr("bench", self.options.bench)
            # The first beat before the trial starts, not when the thread gets round to it.
            self._storage.record_heartbeat(asked._trial_id)
            self._running[trial.trial_id] = asked
            beat = threading.Thread(target=self._beat, args=(asked,), daemon=True)
            self._beating.clear()
            beat.start()
            try:
                yield trial
            finally:
                self._beating.set()
                beat.join()

    def finished(self, trial: PlannedTrial, row: Mapping[str, object] | None) -> None:
        """`row`: its ok row; None: it failed every attempt (the study does not retry it)."""
        asked = self._running.pop(trial.trial_id)
        states = self._optuna.trial.TrialState
        energy = None if row is None else row.get("energy_mj")
        value = float(energy) if isinstance(energy, int | float | str) and energy != "" else 0.0
        try:
            if row is None:
                self.study.tell(asked, state=states.FAIL)
            else:
                self.study.tell(asked, value)
        except ValueError:
            # Failed as silent by another bench while it ran (its heartbeat late on a loaded
            # machine) and enqueued again: its row here stands, and so will the other's.
            pass

    def _claim_lock(self) -> AbstractContextManager[None]:
        """SQLite ignores the row lock optuna takes to pop a waiting trial, so two benches can
        pop the same one; benches sharing an SQLite file (one machine) take turns on a lock
        beside it instead. A server database's own locking suffices."""
        if not self.options.url.startswith("sqlite:///"):
            return contextlib.nullcontext()
        return _file_lock(Path(self.options.url.removeprefix("sqlite:///") + ".lock"))

    def released(self, trial: PlannedTrial) -> None:
        """The sweep paused with this trial taken: it goes back to the queue for any bench."""
        asked = self._running.pop(trial.trial_id, None)
        if asked is None:
            return
        self.study.tell(asked, state=self._optuna.trial.TrialState.FAIL)
        self.study.enqueue_trial({INDEX: trial.index}, user_attrs={"trial_id": trial.trial_id})

    def remaining(self) -> int:
        """Trials of the study not yet complete (waiting, or running on some bench)."""
        states = self._optuna.trial.TrialState
        trials = self.study.get_trials(deepcopy=False, states=(states.WAITING, states.RUNNING))
        return len(trials)

    def _beat(self, asked: Any) -> None:
        # optuna's Trial keeps its storage id private; its heartbeat is recorded by it.
        while not self._beating.wait(self.options.heartbeat_s):
            self._storage.record_heartbeat(asked._trial_id)

    def _beat_for_the_silent(
        self, running: Sequence[Any], watched: dict[int, float | None]
    ) -> None:
        """One heartbeat for each trial seen running elsewhere for longer than the grace
        period: its bench's own beats make it moot, and its bench's death leaves it stale."""
        now = time.monotonic()
        for trial in running:
            since = watched.setdefault(trial._trial_id, now)
            if since is not None and now - since > self.options.grace_s:
                self._storage.record_heartbeat(trial._trial_id)
                watched[trial._trial_id] = None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
