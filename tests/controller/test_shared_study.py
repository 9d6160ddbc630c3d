"""A shared study's queue over a real optuna SQLite storage: the trials a bench takes, and a
trial left running by a bench that died before its first heartbeat (optuna never counts such
a trial stale by itself)."""

from __future__ import annotations

from pathlib import Path

import optuna

from controller.sweep.plan import plan_trials
from controller.sweep.shared import INDEX, SharedStudy, StudyOptions
from tests.controller.test_engine import windows

PLAN = plan_trials(windows(4095, 65535), 1, "sequential", 1)


def _options(tmp_path: Path) -> StudyOptions:
    return StudyOptions(f"sqlite:///{tmp_path / 'study.db'}", "b", heartbeat_s=1, grace_s=1)


def test_a_bench_takes_every_trial_once_in_the_plans_order(tmp_path: Path) -> None:
    shared = SharedStudy(_options(tmp_path), "s", PLAN)
    taken = []
    for trial in shared.claimed(PLAN):
        taken.append(trial.trial_id)
        shared.finished(trial, {"energy_mj": 1.5})
    assert taken == [trial.trial_id for trial in PLAN]
    assert shared.remaining() == 0
    assert [t.value for t in shared.study.trials] == [1.5, 1.5]


def test_a_trial_its_bench_took_and_never_beat_for_is_taken_again(tmp_path: Path) -> None:
    options = _options(tmp_path)
    shared = SharedStudy(options, "s", PLAN)
    # A bench that died between optuna's ask and its first heartbeat: running, never beaten.
    storage = optuna.storages.RDBStorage(options.url, heartbeat_interval=1, grace_period=1)
    dead = optuna.load_study(storage=storage, study_name="s").ask()
    orphan = PLAN[dead.suggest_int(INDEX, 0, len(PLAN) - 1)]
    taken = []
    for trial in shared.claimed(PLAN):
        taken.append(trial.trial_id)
        shared.finished(trial, {"energy_mj": 2.0})
    assert sorted(taken) == sorted(t.trial_id for t in PLAN)
    assert taken[-1] == orphan.trial_id  # taken again once it went silent
    states = [t.state for t in shared.study.trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1  # the dead bench's attempt
    assert states.count(optuna.trial.TrialState.COMPLETE) == len(PLAN)
