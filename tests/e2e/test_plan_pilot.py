"""`h2iot plan` as a researcher runs it: a small pilot sweep on local nodes with the virtual
meter, then the study's config planned from it. What the pilot measured varies with the
machine, so the checks are of the plan's make-up, not of its numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.detectability import meter_floor
from tests.analysis.fake_run import ACS712_STEP_UA, STUDY_WINDOWS

H2IOT = [sys.executable, "-m", "controller.cli"]
ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "configs" / "study.toml"
PILOT_WINDOWS = (1024, 65535)


def _h2iot(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*H2IOT, *argv], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def pilot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    swept = ", ".join(str(w) for w in PILOT_WINDOWS)
    result = _h2iot(
        "sweep", str(ROOT / "configs" / "local.toml"), "--no-dashboard", "--out", str(out),
        "--set", "workload.total_bytes=600000",
        "--set", "run.idle_baseline_s=1",
        "--set", "run.repetitions=3",
        "--set", f"sweep.initial_window_size=[{swept}]",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = out.iterdir()
    return run


def test_the_study_is_planned_from_a_pilot_of_two_of_its_windows(pilot: Path) -> None:
    result = _h2iot("plan", str(STUDY), "--pilot", str(pilot), "--detect", "5%", "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    plan = json.loads(result.stdout)
    points = plan["points"]
    assert [p["point"]["initial_window_size"] for p in points] == list(STUDY_WINDOWS)
    assert [p["basis"] for p in points] == [
        "pilot" if w in PILOT_WINDOWS else "nearest" for w in STUDY_WINDOWS
    ]
    assert all(p["pilot_n"] == 3 for p in points)
    # Timed from the pilot's trial events, each point by its trials start to start.
    assert plan["pilot_timed_by"] == "events"
    assert all(p["trial_s"] > p["window_s"] > 0 for p in points)
    # The study's ACS712: one 132 mW step, and the noise its record states (if any).
    meter = plan["meter"]
    assert meter["resolution"]["current_ua"] == pytest.approx(ACS712_STEP_UA)
    noise_mw = meter["resolution"].get("noise_mw") or 0.0
    for p in points:
        window_s = p["window_s"]
        floor = meter_floor(ACS712_STEP_UA * 5.0 / 1000, noise_mw, window_s, round(window_s * 1000))
        assert p["meter_floor_mj"] == pytest.approx(floor.total_mj)
        assert p["detect_mj"] == pytest.approx(0.05 * p["mean_mj"])
        assert (p["repetitions"] is None) == (p["verdict"] != "resolvable")
    # The config's 68 at every point, and both idle baselines of 5 s.
    expected = 10.0 + sum(68 * p["trial_s"] for p in points)
    assert plan["planned_duration_s"] == pytest.approx(expected)
    assert plan["cochran_repetitions"] == 68
    assert "workload.total_bytes: 600000 in the pilot, 7000000 here" in plan["pilot_differences"]


def test_the_plan_prints_as_a_table_with_its_assumptions(pilot: Path) -> None:
    result = _h2iot("plan", str(STUDY), "--pilot", str(pilot))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    words = " ".join(text.split())  # the notes wrap at the width
    assert "energy_above_idle_mj: repetitions to detect 5% (energies in mJ)" in text
    for window in STUDY_WINDOWS:
        assert f" {window} " in text
    assert "the point it is compared with assumed as spread as this one" in words
    assert "The study's 68 is Cochran's formula" in words
    assert "No pilot trials at initial_window_size = 256, 512, 2048" in words


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--detect", "5 percent"), "--detect '5 percent'"),
        (("--detect", "0mJ"), "--detect '0mJ'"),
    ],
)
def test_a_bad_difference_is_refused_in_one_line(
    argv: tuple[str, ...], message: str, pilot: Path
) -> None:
    result = _h2iot("plan", str(STUDY), "--pilot", str(pilot), *argv)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("h2iot: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_missing_pilot_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    result = _h2iot("plan", str(STUDY), "--pilot", str(tmp_path / "no-run"))
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr
        == f"h2iot: error: {tmp_path / 'no-run'}: not a directory (expected a run folder)\n"
    )
