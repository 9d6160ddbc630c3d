"""The study's meter replayed (analysis.study_meter) on traces whose answer is known: a constant
current, a trace exactly at an ADC step, a pulse shorter than the readings' spacing; then on a
recorded run and in the report's study table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.document import Table
from analysis.load import load_run
from analysis.points import summarize_points
from analysis.study import study_checks
from analysis.study_meter import (
    ENERGY_STUDY_METER,
    READINGS,
    SKETCH,
    Replayed,
    adc_codes,
    printed_w,
    replay,
    replay_run,
    replayable,
    supply_v_of,
    trace_rate_hz,
)
from analysis.workloads.page import study_blocks
from tests.analysis.fake_run import record_run

RATE_HZ = 1000.0
# One ADC code in the sketch's units: 5 V / 1023 over 185 mV/A, as power at 5 V times 0.707.
CODE_MW = 5 / 1023 / 0.185 * 0.707 * 5 * 1000


def _trace(window_s: float, power_mw: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t_s = np.arange(0.0, window_s + 0.5 / RATE_HZ, 1 / RATE_HZ)
    return t_s, np.broadcast_to(np.asarray(power_mw, dtype=np.float64), t_s.shape).copy()


def _level_w(power_mw: float, supply_v: float = 5.0) -> float:
    """What one burst on a constant trace prints."""
    codes = adc_codes(np.full(SKETCH.reads_per_reading, power_mw), supply_v)
    return float(printed_w(codes))


def test_the_sketchs_cadence_is_a_burst_and_the_delay() -> None:
    # 100 reads of 112 us; the 13-byte line fits the 64-byte transmit buffer, so no wait.
    assert SKETCH.burst_s == pytest.approx(0.0112)
    assert SKETCH.print_wait_s == 0
    assert SKETCH.period_s == pytest.approx(0.5112)


def test_known_readings() -> None:
    # No current: code floor(2.5 x 1024 / 5) = 512, read as 512 x 5 / 1023 V = 2.50244 V:
    # 13.2 mA, 46.7 mW after 0.707 x 5 V, printed 0.047 W.
    assert adc_codes(np.array([0.0]), 5.0)[0] == 512
    assert _level_w(0.0) == 0.047
    # 2 W at 5 V is 0.4 A: 2.574 V, code 527 (527.155 floored), read as 0.40954 A -> 1.448 W.
    assert adc_codes(np.array([2000.0]), 5.0)[0] == 527
    assert _level_w(2000.0) == 1.448


@given(st.floats(0.0, 4000.0), st.floats(4.5, 5.5))
def test_a_constant_current_reads_0707_of_its_power_at_5_v_within_one_code(
    power_mw: float, supply_v: float
) -> None:
    window = 1.3
    t_s, trace = _trace(window, power_mw)
    result = replay(t_s, trace, window, supply_v)
    # Every phase reads the same burst of one code: no spread, the level times the window.
    assert result.low_mj == pytest.approx(result.high_mj) == pytest.approx(result.energy_mj)
    assert result.energy_mj == pytest.approx(_level_w(power_mw, supply_v) * window * 1000)
    # The study's power is 5 V x 0.707 x the current, whatever the supply was; the floor
    # takes up to one code off, 1023 for 1024 adds up to one, the print rounds to 1 mW.
    study_mw = 0.707 * 5.0 * power_mw / supply_v
    assert abs(result.energy_mj / window - study_mw) <= CODE_MW + 0.5


def test_a_trace_exactly_at_an_adc_step_reads_that_code() -> None:
    code = 530
    edge_mw = (code * 5 / 1024 - 2.5) / 0.185 * 5 * 1000
    nudge = 1e-6  # the float round trip power -> volts must land on the step's side
    assert adc_codes(np.array([edge_mw + nudge]), 5.0)[0] == code
    assert adc_codes(np.array([edge_mw - nudge]), 5.0)[0] == code - 1
    t_s, trace = _trace(1.0, edge_mw + nudge)
    expected_w = round(0.707 * 5 * (code * 5 / 1023 - 2.5) / 0.185, 3)
    assert replay(t_s, trace, 1.0, 5.0).energy_mj == pytest.approx(expected_w * 1000)


def _pulse(
    window_s: float, start_s: float, on_samples: int, on_mw: float
) -> tuple[np.ndarray, np.ndarray, float]:
    t_s, trace = _trace(window_s, 0.0)
    first = round(start_s * RATE_HZ)
    trace[first : first + on_samples] = on_mw
    # Linear between samples: the pulse's full samples plus a half-sample ramp at each side.
    return t_s, trace, on_samples / RATE_HZ


@pytest.mark.parametrize("periods", [1, 2, 3])
def test_a_short_pulse_in_a_window_of_whole_periods_is_its_duty_share(periods: int) -> None:
    window = periods * SKETCH.period_s
    t_s, trace, pulse_s = _pulse(window, 0.2, 50, 2000.0)
    result = replay(t_s, trace, window, 5.0, phases=2048)
    assert result.readings == periods
    # The expectation over phases: the zero's reading all along, the pulse's for its share.
    on, off = _level_w(2000.0), _level_w(0.0)
    expected = (off * window + (on - off) * pulse_s) * 1000
    assert result.energy_mj == pytest.approx(expected, rel=0.01)
    # A phase catches the pulse or misses it: the spread is the whole pulse's reading.
    assert result.low_mj == pytest.approx(off * window * 1000)
    assert result.high_mj == pytest.approx((on + (periods - 1) * off) / periods * window * 1000)


def test_a_window_shorter_than_the_spacing_takes_one_reading_per_phase() -> None:
    window = 0.15
    t_s, trace, pulse_s = _pulse(window, 0.05, 40, 2000.0)
    result = replay(t_s, trace, window, 5.0, phases=1024)
    assert result.readings == 1
    on, off = _level_w(2000.0), _level_w(0.0)
    expected = (off * window + (on - off) * pulse_s) * 1000
    assert result.energy_mj == pytest.approx(expected, rel=0.01)


def test_an_empty_window_or_trace_has_no_energy() -> None:
    t_s, trace = _trace(1.0, 100.0)
    assert math.isnan(replay(t_s, trace, 0.0, 5.0).energy_mj)
    assert math.isnan(replay(t_s[:0], trace[:0], 1.0, 5.0).energy_mj)


def test_trace_rate() -> None:
    assert trace_rate_hz(np.arange(0.0, 1.0, 1 / 1000)) == pytest.approx(1000)
    assert replayable(trace_rate_hz(np.arange(1000.0) * 0.0010000001))
    assert not replayable(250.0)
    assert trace_rate_hz(np.array([0.0])) == 0


def test_the_supply_comes_from_the_meters_resolution_then_the_config() -> None:
    both = {"meter": {"resolution": {"supply_v": 5.1}}, "config": {"meter": {"supply_v": 5.2}}}
    assert supply_v_of(both) == 5.1
    assert supply_v_of({"config": {"meter": {"supply_v": 5.2}}}) == 5.2
    assert supply_v_of({}) == 5.0


def _checks(run_dir: Path) -> Table:
    run = load_run(run_dir)
    (table,) = [b for b in study_blocks(run, summarize_points(run)) if isinstance(b, Table)]
    return table


def test_a_run_at_1_khz_gets_the_replay_in_its_study_table(tmp_path: Path) -> None:
    run_dir = record_run(tmp_path / "run", windows=(4096, 65535), repetitions=3, rate_hz=1000)
    rows = replay_run(load_run(run_dir)).rows
    high = rows[rows["initial_window_size"] == 65535].iloc[0]
    ok = load_run(run_dir).ok
    ours = ok[ok["initial_window_size"] == 65535]["energy_mj"].mean()
    assert high["n"] == 3
    # The fake run's power is a Pi's 1.2 W and up: 0.707 x, plus a code or less.
    assert 0.69 < high["mean"] / ours < 0.76
    (row,) = [r for r in _checks(run_dir).rows if r[0].startswith("client energy through")]
    assert row[1] == "near 120 mJ"
    assert f"{high['mean']:.0f} mJ replayed vs {ours:.0f} mJ measured" in row[2]
    assert "the study's meter explains 1.4x of the" in row[2]
    assert row[3] == "info"


def test_a_trace_below_1_khz_is_not_replayed(tmp_path: Path) -> None:
    run_dir = record_run(tmp_path / "run", windows=(4096, 65535), repetitions=2, rate_hz=250)
    assert replay_run(load_run(run_dir)).unavailable == "not replayable: trace at 250 Hz"
    (row,) = [r for r in _checks(run_dir).rows if r[0].startswith("client energy through")]
    assert row[2:4] == ("not replayable: trace at 250 Hz", "n/a")


def _rows(metric: str, means: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"metric": metric, "initial_window_size": w, "n": 5, "mean": m, "sd": 1.0, "median": m}
            | {"ci_low": m - 1.0, "ci_high": m + 1.0, "confidence": 0.9}
            for w, m in means.items()
        ]
    )


def _meter_check(meter_mj: float, readings: float) -> str:
    summary = _rows("energy_mj", {4096: 400.0, 65535: 360.0})
    replayed = Replayed(
        pd.concat(
            [
                _rows(ENERGY_STUDY_METER, {4096: 300.0, 65535: meter_mj}),
                _rows(READINGS, {4096: 0.3, 65535: readings}),
            ]
        )
    )
    checks = study_checks(summary, ["initial_window_size"], 0.9, None, replayed)
    (check,) = [c for c in checks if c.finding.startswith("client energy through")]
    return check.measured


def test_the_check_says_how_much_of_the_gap_the_meter_explains() -> None:
    # Ours 3x the study's; the replay 2/3 of ours: 1.5x explained, 2x remains.
    text = _meter_check(240.0, 2.0)
    assert text.startswith("240 mJ replayed vs 360 mJ measured")
    assert "the study's meter explains 1.5x of the 3x gap (37 % of it on a log scale), 2x " in text
    assert "readings on average" not in text
    # A replay above ours widens the gap; a window shorter than the spacing is said so.
    text = _meter_check(400.0, 0.09)
    assert "does not narrow the gap: ours is 3x the study's, the replay 3.3x" in text
    assert "a window here holds 0.09 readings on average" in text
