"""The plan before a run (analysis.plan) on made-up pilots: which pilot trials stand for a
point, the meter's floor naming the points no n resolves, repetitions that fall as the
difference grows, and the run's time; and the pilot's trial times (analysis.pilot)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from analysis.detectability import repetitions_needed
from analysis.errors import RunFormatError
from analysis.pilot import TRIAL_S, Pilot, read_pilot, start_to_start_s
from analysis.plan import (
    Detect,
    MeterAtPlan,
    PlanError,
    RunPlan,
    estimate,
    parse_detect,
    pilot_differences,
    plan_run,
)
from tests.analysis.fake_run import record_run

AXIS = "initial_window_size"
# A meter of 1 mW per step at 5 V and 1 kHz, stating no noise: its floor is 1 mW x the window.
FINE = MeterAtPlan({"current_ua": 200.0, "supply_v": 5.0}, 1000)
WINDOWS = (1024, 65535)


def _values(mean: float, sd: float, n: int) -> np.ndarray:
    """n values with exactly this mean and sample standard deviation (one value: the mean)."""
    if n == 1:
        return np.array([mean])
    z = np.linspace(-1.0, 1.0, n)
    return mean + sd * z / z.std(ddof=1)


def _pilot(
    points: Mapping[Any, tuple[float, float, float, float | None]],
    *,
    n: int = 5,
    axes: tuple[str, ...] = (AXIS,),
) -> Pilot:
    """A pilot whose point (its axes' values) has (mean mJ above idle, sd, window s, trial s)."""
    rows = []
    for key, (mean, sd, window_s, trial_s) in points.items():
        values = key if isinstance(key, tuple) else (key,)
        for number, energy in enumerate(_values(mean, sd, n)):
            rows.append(
                {
                    "trial_id": f"{values}-{number}",
                    **dict(zip(axes, values, strict=True)),
                    "energy_above_idle_mj": energy,
                    "energy_mj": energy + 1200 * window_s,
                    "window_s": window_s,
                    "samples": window_s * 1000,
                    "mean_power_mw": 1200 + mean / window_s,
                    TRIAL_S: math.nan if trial_s is None else trial_s,
                }
            )
    return Pilot(Path("pilot"), axes, pd.DataFrame(rows), {}, "events")


def _plan(
    pilot: Pilot,
    points: Sequence[Mapping[str, Any]],
    detect: str = "5%",
    meter: MeterAtPlan = FINE,
    idle_s: float = 0.0,
) -> RunPlan:
    return plan_run(
        points,
        pilot,
        parse_detect(detect),
        meter,
        confidence=0.90,
        planned_repetitions=68,
        idle_s=idle_s,
    )


def _grid(*windows: int) -> list[dict[str, Any]]:
    return [{AXIS: w} for w in windows]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5%", Detect("5%", fraction=0.05)),
        ("12.5 %", Detect("12.5 %", fraction=0.125)),
        ("20mJ", Detect("20mJ", absolute_mj=20.0)),
        ("0.5 mj", Detect("0.5 mj", absolute_mj=0.5)),
    ],
)
def test_a_difference_is_a_percentage_or_millijoules(text: str, expected: Detect) -> None:
    assert parse_detect(text) == expected


@pytest.mark.parametrize("text", ["5", "five%", "0%", "-3%", "2 J", "", "5%%"])
def test_any_other_difference_is_refused_in_one_line_naming_it(text: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_detect(text)
    message = str(caught.value)
    assert repr(text) in message and "\n" not in message
    assert caught.value.exit_status == 2


def test_a_point_whose_difference_is_within_the_meters_floor_is_named_with_no_n() -> None:
    # The same 100 mJ with the same spread: over a 10 s window the 1 mW step is 10 mJ, more
    # than the 5 mJ to detect; over 0.1 s it is 0.1 mJ.
    pilot = _pilot({1024: (100.0, 4.0, 10.0, 11.0), 65535: (100.0, 4.0, 0.1, 1.0)})
    slow, fast = _plan(pilot, _grid(*WINDOWS)).points
    assert slow.verdict == "below_meter_floor" and slow.repetitions is None
    assert slow.floor.total_mj == pytest.approx(10.0)
    assert fast.verdict == "resolvable"
    assert fast.repetitions == repetitions_needed(4.0, 4.0, 5.0, 0.90)
    assert fast.floor.total_mj == pytest.approx(0.1)


def test_the_floor_is_the_configs_meter_over_the_points_window_and_rate() -> None:
    noisy = MeterAtPlan({"current_ua": 200.0, "supply_v": 5.0, "noise_mw": 40.0}, 100)
    (point,) = _plan(_pilot({1024: (100.0, 4.0, 1.0, 2.0)}), _grid(1024), meter=noisy).points
    # One step over 1 s, and 40 mW of noise over 1 s averaged over its 100 samples.
    assert point.floor.step_mj == pytest.approx(1.0)
    assert point.floor.noise_mj == pytest.approx(40.0 / 10)


def test_repetitions_fall_as_the_difference_to_detect_grows() -> None:
    pilot = _pilot({1024: (100.0, 8.0, 0.5, 1.0)})
    needed = [_plan(pilot, _grid(1024), f"{p}%").points[0].repetitions for p in (2, 5, 10, 20)]
    assert all(n is not None for n in needed)
    assert needed == sorted(needed, reverse=True) and needed[0] > needed[-1]  # type: ignore[type-var]
    absolute = _plan(pilot, _grid(1024), "5mJ").points[0]
    assert absolute.detect_mj == 5.0 and absolute.repetitions == needed[1]


def test_the_run_takes_each_points_trials_start_to_start_plus_the_idle_baselines() -> None:
    pilot = _pilot({1024: (100.0, 8.0, 0.5, 3.0), 65535: (100.0, 4.0, 0.2, 1.0)})
    plan = _plan(pilot, _grid(*WINDOWS), idle_s=10.0)
    wide, narrow = plan.points
    assert wide.repetitions is not None and narrow.repetitions is not None
    assert wide.repetitions > narrow.repetitions  # twice the spread
    assert plan.repetitions == wide.repetitions  # every point repeated as often as the most
    assert plan.duration_s(plan.repetitions) == pytest.approx(10 + plan.repetitions * (3 + 1))
    assert plan.own_duration_s == pytest.approx(10 + wide.repetitions * 3 + narrow.repetitions)
    assert plan.duration_s(68) == pytest.approx(10 + 68 * 4)
    assert plan.cochran == 68  # the study's, at its 90 % and 10 % margin


def test_a_point_without_a_trial_time_leaves_the_runs_time_unknown() -> None:
    plan = _plan(_pilot({1024: (100.0, 8.0, 0.5, None)}), _grid(1024))
    assert plan.points[0].estimate.trial_s is None
    assert plan.duration_s(68) is None and plan.own_duration_s is None


def test_points_below_the_floor_are_left_out_of_the_n_the_run_needs() -> None:
    pilot = _pilot({1024: (100.0, 40.0, 10.0, 11.0), 65535: (100.0, 4.0, 0.1, 1.0)})
    plan = _plan(pilot, _grid(*WINDOWS))
    assert plan.repetitions == plan.points[1].repetitions
    no_point = _plan(pilot, _grid(1024))
    assert no_point.repetitions is None and no_point.own_duration_s == pytest.approx(0.0)


def test_a_point_the_pilot_did_not_run_takes_the_nearest_pilot_point_log2_apart() -> None:
    pilot = _pilot({1024: (100.0, 8.0, 0.5, 2.0), 65535: (50.0, 2.0, 0.2, 1.0)})
    plan = _plan(pilot, _grid(256, 4096, 16384, 65535))
    bases = [(p.estimate.basis, p.estimate.basis_text) for p in plan.points]
    assert bases == [
        ("nearest", "5 at 1024"),
        ("nearest", "5 at 1024"),
        ("nearest", "5 at 65535"),
        ("pilot", "5"),
    ]
    # Between two pilot points, equally far: the smaller, whichever the pilot ran first.
    for order in (WINDOWS, WINDOWS[::-1]):
        between = _pilot({w: (100.0, 8.0, 0.5, 2.0) for w in (256, *order)})
        assert estimate(between, {AXIS: 512}, "energy_mj").basis_text == "5 at 256"
    assert plan.points[2].estimate.sd_mj == pytest.approx(2.0)


def test_a_pilot_of_fewer_axes_is_matched_on_the_axes_it_has() -> None:
    pilot = _pilot({1024: (100.0, 8.0, 0.5, 2.0), 65535: (50.0, 2.0, 0.2, 1.0)})
    found = estimate(pilot, {AXIS: 65535, "protocol": "h3"}, "energy_above_idle_mj")
    assert (found.basis, found.n, found.mean_mj) == ("pilot", 5, pytest.approx(50.0))


def test_a_pilot_of_more_axes_pools_the_spread_within_its_points_that_match() -> None:
    points = {
        (1024, "h2c"): (100.0, 3.0, 0.5, 2.0),
        (1024, "h3"): (200.0, 4.0, 0.5, 2.0),
        (65535, "h2c"): (50.0, 1.0, 0.2, 1.0),
    }
    pilot = _pilot(points, axes=(AXIS, "protocol"))
    found = estimate(pilot, {AXIS: 1024}, "energy_above_idle_mj")
    # The two protocols' means are 100 mJ apart: only the spread within each counts.
    assert found.basis == "pilot" and found.n == 10
    assert found.sd_mj == pytest.approx(math.sqrt((9 + 16) / 2))
    assert found.mean_mj == pytest.approx(150.0)


def test_a_point_no_pilot_point_shares_a_category_with_takes_the_pooled_spread() -> None:
    points = {(1024, "h2c"): (100.0, 3.0, 0.5, 2.0), (65535, "h2c"): (50.0, 4.0, 0.2, 1.0)}
    pilot = _pilot(points, axes=(AXIS, "protocol"))
    found = estimate(pilot, {AXIS: 1024, "protocol": "h3"}, "energy_above_idle_mj")
    assert (found.basis, found.basis_text) == ("pooled", "10 pooled")
    assert found.sd_mj == pytest.approx(math.sqrt((9 + 16) / 2))
    disjoint = estimate(pilot, {"max_frame_size": 16384}, "energy_above_idle_mj")
    assert disjoint.basis == "pooled"


def test_a_pilot_of_one_trial_a_point_cannot_say_its_spread() -> None:
    (point,) = _plan(_pilot({1024: (100.0, 0.0, 0.5, 1.0)}, n=1), _grid(1024)).points
    assert point.verdict == "unknown" and point.repetitions is None
    assert point.to_dict()["sd_mj"] is None  # JSON has no NaN


def test_a_pilot_without_the_metric_is_refused_naming_it() -> None:
    pilot = _pilot({1024: (100.0, 8.0, 0.5, 1.0)})
    bare = Pilot(
        pilot.path, pilot.axes, pilot.rows.drop(columns="energy_above_idle_mj"), {}, "events"
    )
    with pytest.raises(PlanError, match="energy_above_idle_mj"):
        _plan(bare, _grid(1024))
    with pytest.raises(PlanError, match="--metric 'power'"):
        plan_run(_grid(1024), pilot, parse_detect("5%"), FINE, metric="power",
                 confidence=0.9, planned_repetitions=5)  # fmt: skip


def test_the_plan_as_json_carries_each_point_and_the_runs_figures() -> None:
    pilot = _pilot({1024: (100.0, 4.0, 10.0, 11.0), 65535: (100.0, 4.0, 0.1, 1.0)})
    record = _plan(pilot, _grid(*WINDOWS)).to_dict()
    assert record["detect"] == "5%" and record["cochran_repetitions"] == 68
    slow, fast = record["points"]
    assert slow["point"] == {AXIS: 1024} and slow["verdict"] == "below_meter_floor"
    assert slow["repetitions"] is None and slow["duration_s"] is None
    assert record["repetitions"] == fast["repetitions"]
    assert fast["duration_s"] == pytest.approx(fast["repetitions"] * 1.0)


def test_trials_are_timed_start_to_start_a_retry_in_its_trial_and_no_gap_over_a_pause() -> None:
    events = [
        {"event": "trial_started", "trial_id": "t1", "attempt": 1, "t_wall_ns": 0},
        {"event": "trial_started", "trial_id": "t2", "attempt": 1, "t_wall_ns": 2_000_000_000},
        {"event": "trial_started", "trial_id": "t2", "attempt": 2, "t_wall_ns": 5_000_000_000},
        {"event": "trial_started", "trial_id": "t3", "attempt": 1, "t_wall_ns": 6_000_000_000},
        {"event": "sweep_paused", "t_wall_ns": 7_000_000_000},
        {"event": "sweep_resumed", "t_wall_ns": 90_000_000_000},
        {"event": "trial_started", "trial_id": "t4", "attempt": 1, "t_wall_ns": 91_000_000_000},
        {"event": "trial_started", "trial_id": "t5", "attempt": 1, "t_wall_ns": 93_000_000_000},
    ]
    assert start_to_start_s(events) == {"t1": 2.0, "t2": 4.0, "t4": 2.0}


def test_a_pilot_is_read_from_its_run_folder(tmp_path: Path) -> None:
    # The fake run records one fetch start for every trial and no trial events: no times.
    run = record_run(tmp_path / "run", windows=WINDOWS, repetitions=3)
    pilot = read_pilot(run)
    assert pilot.axes == (AXIS,) and len(pilot.rows) == 6
    assert pilot.timed_by == "nothing" and pilot.rows[TRIAL_S].isna().all()
    assert pilot.config["run"]["repetitions"] == 3


def test_a_pilot_without_trial_events_is_timed_from_its_rows_fetch_starts(
    tmp_path: Path,
) -> None:
    run = record_run(tmp_path / "run", windows=WINDOWS, repetitions=2)
    trials = run / "trials.csv"
    table = pd.read_csv(trials, dtype=str, keep_default_na=False)
    table["t_wall_start_ns"] = [str(n * 3_000_000_000) for n in range(len(table))]
    table.to_csv(trials, index=False)
    pilot = read_pilot(run)
    assert pilot.timed_by == "row timestamps"
    # Rows at 0, 3, (a failed attempt at 6), 9 and 12 s: the ok rows' starts, the last untimed.
    timed = dict(zip(pilot.rows["trial_id"], pilot.rows[TRIAL_S], strict=True))
    assert {k: v for k, v in timed.items() if not math.isnan(v)} == {
        "t0001": 3.0,
        "t0002": 6.0,
        "t0003": 3.0,
    }


def test_a_missing_pilot_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(RunFormatError, match="not a directory") as caught:
        read_pilot(tmp_path / "nowhere")
    assert "\n" not in str(caught.value)


def test_what_the_pilot_ran_otherwise_is_said_but_the_swept_keys() -> None:
    pilot = {
        "workload": {"total_bytes": 600_000, "site_seed": 0},
        "meter": {"source": "virtual", "rate_hz": 1000},
        "nodes": {"client": {"host": "local"}},
    }
    config = {
        "workload": {"total_bytes": 7_000_000, "site_seed": 0},
        "meter": {"source": "serial", "rate_hz": 1000},
        "nodes": {"client": {"host": "client.local"}},
    }
    assert pilot_differences(pilot, config, ()) == (
        "meter.source: 'virtual' in the pilot, 'serial' here",
        "nodes.client.host: 'local' in the pilot, 'client.local' here",
        "workload.total_bytes: 600000 in the pilot, 7000000 here",
    )
    assert len(pilot_differences(pilot, config, ("total_bytes",))) == 2


def test_a_pilot_without_windows_is_refused_naming_it() -> None:
    pilot = _pilot({1024: (100.0, 8.0, 0.5, 1.0)})
    rows = pilot.rows.assign(window_s=math.nan)
    with pytest.raises(PlanError, match=r"^pilot: trial \(1024,\)-0 .* no window_s$"):
        _plan(Pilot(pilot.path, pilot.axes, rows, {}, "events"), _grid(1024))
