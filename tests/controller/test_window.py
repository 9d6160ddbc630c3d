"""What a trial's energy integrates over: the fetch, or its whole process (`energy.window`)."""

from __future__ import annotations

import pytest

from controller.nodes.agent import TRIAL_PROCESS
from controller.sweep.window import TrialSpan, WindowError, trial_span

FETCH = {
    "t_wall_start_ns": 5_000_000_000,
    "t_wall_end_ns": 5_050_000_000,
    "t_mono_start_ns": 1_300_000_000,
    "t_mono_end_ns": 1_350_000_000,
}


def test_the_fetch_window_is_the_fetch_on_the_controllers_clock() -> None:
    assert trial_span(FETCH, offset_ns=1000, window="fetch") == TrialSpan(
        4_999_999_000, 5_049_999_000
    )


def test_the_process_window_widens_the_fetch_by_the_process_around_it() -> None:
    record = {
        **FETCH,
        TRIAL_PROCESS: {"t_mono_start_ns": 1_000_000_000, "t_mono_end_ns": 1_400_000_000},
    }
    span = trial_span(record, offset_ns=0, window="process")
    assert (span.start_wall_ns, span.end_wall_ns) == (5_000_000_000, 5_050_000_000)
    assert span.before_s == pytest.approx(0.3)  # interpreter start-up before the fetch
    assert span.after_s == pytest.approx(0.05)


def test_the_process_window_needs_the_node_to_have_timed_the_process() -> None:
    with pytest.raises(WindowError, match="did not time its trial process"):
        trial_span(FETCH, offset_ns=0, window="process")
    inside_out = {
        **FETCH,
        TRIAL_PROCESS: {"t_mono_start_ns": 1_310_000_000, "t_mono_end_ns": 1_400_000_000},
    }
    with pytest.raises(WindowError, match="outside its process"):
        trial_span(inside_out, offset_ns=0, window="process")


def test_a_record_with_phases_takes_its_connections_close_into_the_window() -> None:
    # The marker falls once the client closed its connection: the clock's window ends there too.
    closed = {**FETCH, "phases": {"close_done_mono_ns": 1_352_000_000}}
    assert trial_span(closed, offset_ns=0, window="fetch") == TrialSpan(
        5_000_000_000, 5_052_000_000
    )
    process = {
        **closed,
        TRIAL_PROCESS: {"t_mono_start_ns": 1_000_000_000, "t_mono_end_ns": 1_400_000_000},
    }
    span = trial_span(process, offset_ns=0, window="process")
    assert span.end_wall_ns == 5_052_000_000
    assert span.after_s == pytest.approx(0.048)  # the process's teardown after the close
