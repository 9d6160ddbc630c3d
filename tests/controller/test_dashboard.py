from __future__ import annotations

from rich.console import Console

from controller.dashboard.state import (
    MeterHealth,
    NodeStatus,
    PowerSamples,
    SweepStarted,
    SweepState,
    TrialFinished,
    TrialStarted,
    apply,
)
from controller.dashboard.view import render, sparkline


def _text(state: SweepState, width: int = 140) -> str:
    console = Console(width=width, color_system=None, record=True)
    console.print(render(state))
    return console.export_text()


def test_dashboard_shows_progress_current_trial_meter_power_and_results() -> None:
    state = SweepState()
    point = (("initial_window_size", 256),)
    events = [
        SweepStarted(
            "data/runs/r1",
            total_trials=4,
            done_trials=0,
            axes=("initial_window_size",),
            confidence=0.9,
            t_mono_s=100.0,
        ),
        NodeStatus("client", "local, pinned to core 1"),
        MeterHealth("virtual", 1000.0, crc_errors=2, frame_gaps=1, samples_dropped=0),
        PowerSamples(
            tuple(i / 1000 for i in range(20000)), tuple(1200.0 + i % 7 for i in range(20000))
        ),
        TrialFinished("t1", point, True, None, 0.5, 0.2, 110.0, t_mono_s=110.0),
        TrialFinished(
            "t2", point, True, None, 0.7, 0.3, 130.0, t_mono_s=120.0, phases_mj=(13.0, 104.0, 13.0)
        ),
        TrialFinished(
            "t3",
            (("initial_window_size", 65535),),
            False,
            "timeout",
            None,
            None,
            None,
            t_mono_s=125.0,
        ),
        TrialStarted("t4", (("initial_window_size", 65535),), repetition=1, attempt=2),
    ]
    for event in events:
        apply(state, event)
    text = _text(state)
    assert "2/4 trials, 1 failed attempts, ETA 0:00:20" in text
    assert "t4: initial_window_size=65535, repetition 1, attempt 2" in text
    assert "virtual, 1000 samples/s, CRC errors 2, gaps 1, dropped 0" in text
    assert "mW (last 10 s)" in text
    assert "local, pinned to core 1" in text
    assert "t3 failed: timeout" in text
    # The last trial with phases (t3 failed): its split while t4 runs.
    assert "t2: connect 13.0 mJ (10%), exchange 104.0 mJ (80%), close 13.0 mJ (10%)" in text
    # Two fetches at 256: mean 600 ms with a 90 % t interval (t = 6.314, sd = 141.4 ms),
    # rounded to the interval's second significant figure.
    assert "600 ± 631" in text
    assert "120 ± 63" in text
    # The power trace keeps only the last ten seconds.
    assert state.power[0][0] >= state.power[-1][0] - 10.0


def test_sparkline_scales_to_its_width() -> None:
    line = sparkline([float(i) for i in range(1000)], 50)
    assert len(line) == 50
    assert line[0] == "▁" and line[-1] == "█"


def test_a_full_window_sweep_fits_an_80_column_terminal() -> None:
    """The README's demo in a default terminal: every cell on one line, digits to the CI's
    second significant figure."""
    state = SweepState()
    apply(state, SweepStarted("data/runs/r1", 18, 0, ("initial_window_size",), 0.9, 0.0))
    apply(state, PowerSamples(tuple(i / 1000 for i in range(10000)), (4025.0,) * 10000))
    expected = []
    for window, response_s, cpu_s, energy_mj in [
        (256, 2.3687, 0.9784, 3520.6),
        (4096, 0.1703, 0.0697, 278.5),
        (65535, 0.0417, 0.0166, 60.5),
    ]:
        point = (("initial_window_size", window),)
        for spread in (0.98, 1.02):
            apply(
                state,
                TrialFinished(
                    f"t{window}-{spread}",
                    point,
                    True,
                    None,
                    response_s * spread,
                    cpu_s * spread,
                    energy_mj * spread,
                    t_mono_s=1.0,
                ),
            )
        expected.append(f"{window} │ 2 │      0 │")
    text = _text(state, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    for row in expected:
        assert row in text
    # 2368.7 ms +- 2 %: half-width 299 ms (t = 6.314 with n = 2) -> whole milliseconds.
    assert "2369 ± 299" in text
    assert "16.6 ± 2.1" in text
    assert "4025 mW (last 10 s)" in text


def test_the_results_table_has_a_row_per_point_of_every_axis_categorical_too() -> None:
    state = SweepState()
    apply(state, SweepStarted("data/runs/r2", 8, 0, ("size_bytes", "mode"), 0.9, 0.0))
    for size in (1024, 65536):
        for mode in ("sequential", "concurrent"):
            point = (("size_bytes", size), ("mode", mode))
            apply(state, TrialStarted("t", point, 1, 1))
            apply(state, TrialFinished("t", point, True, None, 0.01, 0.002, 5.0, t_mono_s=1.0))
    text = _text(state, width=80)
    rows = [line for line in text.splitlines() if "1024" in line or "65536" in line]
    assert len(rows) == 4
    assert sum("concurrent" in row for row in rows) == 2
    assert "energy" in text and "mJ" in text  # nothing cropped at the right
    apply(state, TrialStarted("t5", (("size_bytes", 1024), ("mode", "concurrent")), 2, 1))
    assert "t5: size_bytes=1024, mode=concurrent, repetition 2" in _text(state, width=80)


def test_dashboard_shows_the_last_trials_exchanges_and_handshakes() -> None:
    state = SweepState()
    point = (("connection", "resume"),)
    tally = (("ok", 19), ("failed", 1), ("full", 1), ("0rtt", 19))
    apply(state, TrialFinished("t1", point, True, None, 20.0, 0.4, 900.0, 1.0, exchanges=tally))
    # A trial of a workload that lists none leaves the last one's in place.
    apply(state, TrialFinished("t2", point, True, None, 20.0, 0.4, 900.0, 2.0))
    apply(state, TrialStarted("t3", point, repetition=2, attempt=1))
    assert "t1: 19 ok, 1 failed; handshakes 1 full, 19 0rtt" in _text(state)
