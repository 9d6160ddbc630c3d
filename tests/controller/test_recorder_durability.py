"""Nothing a crash or a full disk leaves behind counts as a result (issue 13, items 5 and 6).

A kill between a trial's two writes, a kill inside the trace's write, a disk that fills: every
ok row keeps its trace, no file is half-written, a failed write is cut back and reported in one
line naming the run directory. The full disk is real: a small tmpfs, filled up.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from analysis.columns import POWER_DIR, TRIALS
from analysis.facts import trial_facts
from analysis.load import load_run
from controller.meter.node_power import TruthWriter
from controller.run.errors import RunDiskFull
from controller.run.recorder import RunRecorder, read_trials
from controller.sweep.engine import SweepEngine
from controller.sweep.plan import plan_trials
from tests._disk import fill, tmpfs
from tests.controller.test_engine import IDLE_MW, ConstantMeter, StandInNodes, windows

AXES = ("initial_window_size",)
PLAN = plan_trials(windows(256, 65535), 2, "sequential", seed=1)


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, no handler sees it."""


def _engine(recorder: RunRecorder) -> SweepEngine:
    return SweepEngine(
        recorder=recorder,
        nodes=StandInNodes(set()),
        meter=ConstantMeter(),
        idle_mw=IDLE_MW,
        retries=0,
        trial_timeout_s=10,
        post=lambda event: None,
    )


def _ok_rows_without_trace(run: Path) -> list[str]:
    return [
        row["trial_id"]
        for row in read_trials(run)
        if row["status"] == "ok" and not (run / POWER_DIR / f"{row['trial_id']}.npy").exists()
    ]


@pytest.mark.parametrize("kill_in", ["save_power", "append_trial"])
def test_a_kill_between_a_trials_writes_never_leaves_an_ok_row_without_its_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_in: str
) -> None:
    run = tmp_path / "run"
    recorder = RunRecorder.create(run, AXES, {"axes": list(AXES)})
    calls = 0
    real = getattr(RunRecorder, kill_in)

    def dies_on_the_third_trial(self: RunRecorder, *args: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Killed
        real(self, *args)

    monkeypatch.setattr(RunRecorder, kill_in, dies_on_the_third_trial)
    with pytest.raises(Killed):
        _engine(recorder).run(PLAN)
    recorder.close()
    assert len([r for r in read_trials(run) if r["status"] == "ok"]) == 2
    assert _ok_rows_without_trace(run) == []


def test_a_kill_inside_the_traces_write_leaves_no_half_written_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    recorder = RunRecorder.create(run, AXES, {"axes": list(AXES)})

    def killed(*args: object) -> None:
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", killed)
        with pytest.raises(Killed):
            recorder.save_power("t1", np.array([0.0, 0.001]), np.array([1200.0, 1300.0]))
    recorder.close()
    assert not (run / POWER_DIR / "t1.npy").exists()  # never a truncated .npy under its name
    RunRecorder.resume(run)[0].close()
    assert list((run / POWER_DIR).iterdir()) == []  # the leftover temporary file is gone


def test_resume_finds_ok_rows_without_a_trace_and_the_report_counts_them(tmp_path: Path) -> None:
    run = tmp_path / "run"
    recorder = RunRecorder.create(run, AXES, {"axes": list(AXES)})
    _engine(recorder).run(PLAN)
    recorder.close()
    lost = PLAN[1].trial_id
    (run / POWER_DIR / f"{lost}.npy").unlink()  # as a run recorded row-first could be
    resumed, _manifest = RunRecorder.resume(run)
    assert resumed.ok_without_trace() == [lost]
    resumed.close()
    facts = dict(trial_facts(load_run(run)))
    assert facts["ok rows without their power trace"] == f"1 ({lost})"


# --- a full disk, for real -------------------------------------------------------------------


def test_a_full_disk_cuts_back_the_failed_write_and_says_so_in_one_line(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "2m") as disk:
        run = disk / "run"
        recorder = RunRecorder.create(run, AXES, {"axes": list(AXES)})
        _engine(recorder).run(PLAN[:2])
        before = (run / TRIALS).read_bytes()
        fill(disk)
        with pytest.raises(RunDiskFull) as full:
            _engine(recorder).run(PLAN)
        assert "\n" not in str(full.value)
        assert str(full.value).startswith(f"{run}: the disk is full (")
        assert full.value.exit_status == 4
        # One 64 KiB block may still fit a trace, never a row: tmpfs fills block by block.
        big = np.arange(100_000, dtype=np.float64)
        with pytest.raises(RunDiskFull, match=r"the disk is full \(writing t9\.npy\)"):
            recorder.save_power("t9", big, big)
        with pytest.raises(RunDiskFull, match=r"the disk is full \(writing trials\.csv\)"):
            recorder.append_trial({"trial_id": "t9", "status": "ok", "error": "x" * 200_000})
        recorder.close()
        assert (run / TRIALS).read_bytes() == before  # every row before it, and nothing else
        assert not list((run / POWER_DIR).glob("*.partial"))
        assert not (run / POWER_DIR / "t9.npy").exists()
        assert _ok_rows_without_trace(run) == []


def test_the_meters_ground_truth_ends_on_a_whole_line_and_the_meter_goes_on(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", "1m") as disk:
        truth = TruthWriter(disk / "meter-truth.csv")
        truth.segment(0, 10, (0,), np.array([1200.0]))
        truth.flush()
        fill(disk)
        for first in range(10, 100_000, 10):  # more than the last free block holds
            truth.segment(first, first + 10, (0,), np.array([1234.5]))
        truth.flush()  # the full disk: kept in `error`, not raised into the meter's loop
        truth.close()
        assert truth.error is not None and truth.error.errno == errno.ENOSPC
        text = (disk / "meter-truth.csv").read_text()
        assert text.endswith("\n") and text.splitlines()[1] == "0,0,10,0,1200.000000"
