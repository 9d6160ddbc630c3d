from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analysis.columns import FORMAT_VERSION
from analysis.trial_columns import header
from controller.errors import ConfigError
from controller.run.recorder import RunRecorder, read_trials

AXES = ("initial_window_size",)


def _row(trial_id: str, status: str = "ok") -> dict[str, object]:
    return {
        "trial_id": trial_id,
        "attempt": 1,
        "status": status,
        "repetition": 1,
        "initial_window_size": 256,
        "energy_mj": 12.5,
    }


def test_rows_survive_a_torn_write_and_are_never_rewritten(tmp_path: Path) -> None:
    run = tmp_path / "run"
    recorder = RunRecorder.create(run, AXES, {"axes": list(AXES), "config": {}})
    recorder.append_trial(_row("t1"))
    recorder.append_trial(_row("t2", "failed"))
    recorder.close()
    # A kill in the middle of writing the third row leaves a torn line.
    with (run / "trials.csv").open("a") as handle:
        handle.write("t3,1,ok,,0,0,1,256,17")
    resumed, manifest = RunRecorder.resume(run)
    assert manifest["format_version"] == FORMAT_VERSION
    resumed.append_trial(_row("t3"))
    resumed.close()
    rows = read_trials(run)
    assert [(r["trial_id"], r["status"]) for r in rows] == [
        ("t1", "ok"),
        ("t2", "failed"),
        ("t3", "ok"),
    ]
    assert (run / "trials.csv").read_text().splitlines()[0].split(",") == header(AXES)


def test_new_run_refuses_an_existing_directory_and_resume_a_foreign_one(tmp_path: Path) -> None:
    run = tmp_path / "run"
    RunRecorder.create(run, AXES, {"axes": list(AXES)}).close()
    with pytest.raises(ConfigError, match="not empty"):
        RunRecorder.create(run, AXES, {})
    (tmp_path / "other").mkdir()
    with pytest.raises(ConfigError, match=r"manifest\.json: no such file"):
        RunRecorder.resume(tmp_path / "other")
    (run / "manifest.json").write_text(json.dumps({"format_version": 99}))
    with pytest.raises(ConfigError, match="format_version: 99 is not supported"):
        RunRecorder.resume(run)


def test_power_trace_and_events(tmp_path: Path) -> None:
    recorder = RunRecorder.create(tmp_path / "run", AXES, {"axes": list(AXES)})
    recorder.save_power("t1", np.array([0.0, 0.001]), np.array([1200.0, 1300.0]))
    recorder.event("trial_started", trial_id="t1")
    recorder.close()
    trace = np.load(tmp_path / "run" / "power" / "t1.npy")
    assert trace.shape == (2, 2)
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert events[0]["event"] == "trial_started"
    with pytest.raises(ValueError, match=r"not trials\.csv columns"):
        RunRecorder.resume(tmp_path / "run")[0].append_trial({"bogus": 1})
