"""`h2iot plan`'s controller side: the config's meter record, the table as a terminal shows it,
and the command's one-line refusals (a pilot it needs, a difference it cannot read)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from analysis.pilot import read_pilot
from analysis.plan import MeterAtPlan, parse_detect, plan_run
from controller.cli import main
from controller.config import load_config
from controller.plan.meter_record import config_meter_record
from controller.plan.view import hours_minutes, render
from tests.analysis.fake_run import ACS712_STEP_UA, STUDY_WINDOWS, record_run

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "configs" / "study.toml"


def test_the_studys_meter_is_its_acs712s_step_at_its_supply() -> None:
    record = config_meter_record(load_config(STUDY))
    assert record["current_ua"] == pytest.approx(ACS712_STEP_UA)
    assert record["supply_v"] == 5.0 and "ACS712-5A on A0" in record["basis"]


def test_an_i2c_channel_and_a_ppk2_give_their_own_steps() -> None:
    ina226 = config_meter_record(load_config(ROOT / "configs" / "local-ina226.toml"))
    assert "INA226" in ina226["basis"] and "ranges" not in ina226
    ppk2 = config_meter_record(load_config(ROOT / "configs" / "local-ppk2.toml"))
    assert len(ppk2["ranges"]) == 5 and ppk2["ranges"][-1]["ceiling_ua"] is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0:00"), (1.0, "0:01"), (60.0, "0:01"), (3600.0, "1:00"), (3661.0, "1:02")],
)
def test_times_are_hours_and_minutes_rounded_up(seconds: float, text: str) -> None:
    assert hours_minutes(seconds) == text


def test_an_unknown_time_is_a_question_mark() -> None:
    assert hours_minutes(None) == "?" and hours_minutes(math.nan) == "?"


@pytest.fixture(scope="module")
def pilot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study's shape, 5 repetitions at four of its nine windows, 250 samples a second."""
    return record_run(tmp_path_factory.mktemp("pilot") / "run", windows=(256, 1024, 4096, 65535))


def test_the_table_names_the_points_no_n_resolves_and_what_the_run_takes(pilot: Path) -> None:
    config = load_config(STUDY)
    plan = plan_run(
        [dict(point) for point in config.sweep.points()],
        read_pilot(pilot),
        parse_detect("5%"),
        MeterAtPlan(config_meter_record(config), config.meter.rate_hz),
        confidence=config.run.confidence,
        planned_repetitions=config.run.repetitions,
    )
    console = Console(width=120, color_system=None, record=True)
    console.print(render(plan))
    text = " ".join(console.export_text().split())  # the notes wrap at the width
    # The ACS712's 132 mW step held over a window of half a second and more is tens of mJ:
    # 5 % of the study's 120 mJ above idle is below it at every window.
    assert "Cannot resolve at any n (no n): initial_window_size = 256, 512, 1024" in text
    assert text.count("no n") >= len(STUDY_WINDOWS)
    assert "5 at 256" in text and "No pilot trials at initial_window_size = 512, 2048" in text
    assert "No point is resolvable" in text
    assert "The study's 68 is Cochran's formula (68 at 90 % confidence" in text


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["plan", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_plan_as_json_has_every_point_of_the_configs_grid(
    pilot: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _main(
        capsys, str(STUDY), "--pilot", str(pilot), "--detect", "5000mJ", "--json"
    )
    assert (status, err) == (0, "")
    plan = json.loads(out)
    assert [p["point"]["initial_window_size"] for p in plan["points"]] == list(STUDY_WINDOWS)
    assert plan["detect"] == "5000mJ" and plan["planned_repetitions"] == 68
    assert all(p["verdict"] == "resolvable" for p in plan["points"])
    assert plan["repetitions"] == max(p["repetitions"] for p in plan["points"])
    # The fake pilot records one start time for every trial: no time to plan with.
    assert plan["pilot_timed_by"] == "nothing" and plan["duration_s"] is None
    assert "meter.source: 'virtual' in the pilot, 'serial' here" in plan["pilot_differences"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((str(STUDY),), "a plan needs a pilot run (--pilot RUN_DIR)"),
        ((str(STUDY), "--pilot", "PILOT", "--detect", "5"), "--detect '5': give a positive"),
        ((str(STUDY), "--pilot", "PILOT", "--metric", "power"), "--metric 'power': one of"),
        ((str(STUDY), "--pilot", "nowhere"), "nowhere: not a directory"),
        ((str(ROOT / "configs" / "optimize.toml"), "--pilot", "PILOT"), "plan a grid sweep"),
        (("no-such.toml", "--pilot", "PILOT"), "no-such.toml"),
    ],
)
def test_a_mistake_is_refused_in_one_line_with_status_2(
    argv: tuple[str, ...], message: str, pilot: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = [str(pilot) if word == "PILOT" else word for word in argv]
    status, out, err = _main(capsys, *words)
    assert status == 2 and out == ""
    assert err.startswith("h2iot: error: ") and message in err
    assert err.count("\n") == 1, err


def test_a_point_of_unknown_spread_is_marked_and_said(tmp_path: Path) -> None:
    once = record_run(tmp_path / "once", windows=(1024,), repetitions=1)
    plan = plan_run(
        [{"initial_window_size": 1024}],
        read_pilot(once),
        parse_detect("5%"),
        MeterAtPlan({"current_ua": 1.0, "supply_v": 5.0}, 1000),
        confidence=0.9,
        planned_repetitions=68,
    )
    assert plan.points[0].verdict == "unknown"
    console = Console(width=120, color_system=None, record=True)
    console.print(render(plan))
    text = " ".join(console.export_text().split())
    assert "Not known (?): initial_window_size = 1024: the pilot has fewer than two" in text


def test_the_floor_says_the_meter_and_its_noise_where_the_record_states_one(pilot: Path) -> None:
    def notes(record: dict[str, object]) -> str:
        plan = plan_run(
            [{"initial_window_size": 1024}],
            read_pilot(pilot),
            parse_detect("5%"),
            MeterAtPlan(record, 1000),
            confidence=0.9,
            planned_repetitions=68,
        )
        assert plan.to_dict()["meter"] == {"resolution": record, "rate_hz": 1000}
        console = Console(width=120, color_system=None, record=True)
        console.print(render(plan))
        return " ".join(console.export_text().split())

    quiet = {"current_ua": 1.0, "supply_v": 5.0, "basis": "a test meter"}
    assert "the config's meter (a test meter), one step held over the window (its record" in (
        notes(quiet)
    )
    noisy = notes({**quiet, "noise_mw": 2.5})
    assert "plus its 2.5 mW rms noise averaged over the window's samples at 1000 a second" in noisy
