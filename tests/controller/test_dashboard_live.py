"""The live dashboard's thread: events posted from other threads are drained into the state and
redrawn on a real rich Live (a terminal-like console writing to memory), and closing it draws
what was posted just before, then stops the thread. The same thread drawing a whole sweep in a
pseudo-terminal: tests/e2e/test_dashboard_sweep.py."""

from __future__ import annotations

import io
import threading
import time

from rich.console import Console

from controller.dashboard.live import LiveDashboard
from controller.dashboard.state import SweepStarted, TrialFinished, TrialStarted

POINT = (("initial_window_size", 4096),)
_HANG_S = 30.0  # a guard against a hang, not a timing assertion


def _terminal() -> tuple[Console, io.StringIO]:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    return console, screen


def _wait_for(screen: io.StringIO, text: str) -> None:
    deadline = time.monotonic() + _HANG_S
    while text not in screen.getvalue():
        assert time.monotonic() < deadline, f"never drawn: {text!r}"
        time.sleep(0.02)


def test_posted_events_are_redrawn_while_it_runs_and_the_last_ones_on_close() -> None:
    console, screen = _terminal()
    dashboard = LiveDashboard(console)
    threads = [thread for thread in threading.enumerate() if thread.name == "dashboard"]
    assert len(threads) == 1
    # Posted from another thread, as the sweep engine does.
    poster = threading.Thread(
        target=dashboard.post,
        args=(SweepStarted("data/runs/r", 2, 0, ("initial_window_size",), 0.9, 0.0),),
    )
    poster.start()
    poster.join()
    dashboard.post(TrialStarted("t1", POINT, repetition=1, attempt=1))
    _wait_for(screen, "t1: initial_window_size=4096, repetition 1")  # drawn while running
    assert "0/2 trials" in screen.getvalue()
    # Posted right before close, with no refresh in between: close still draws them.
    dashboard.post(TrialFinished("t1", POINT, True, None, 0.05, 0.02, 40.0, t_mono_s=1.0))
    dashboard.post(TrialFinished("t2", POINT, True, None, 0.07, 0.03, 60.0, t_mono_s=2.0))
    dashboard.close()
    assert not threads[0].is_alive()
    assert dashboard.state.done_trials == 2
    last = screen.getvalue()
    last = last[last.rindex("h2iot sweep ") :]
    assert last.startswith("h2iot sweep 2/2 trials, 0 failed attempts")
    assert "50.0" not in last and "60 ± 63" in last  # both responses in the mean, 60 ms
    assert screen.getvalue().endswith("\x1b[?25h")  # the cursor is back: Live has stopped


def test_a_late_thread_still_draws_every_step_of_the_sweep() -> None:
    """Every event of a sweep waiting at once, as when a busy machine ran the dashboard's
    thread late: each trial's start and end still got a frame of its own."""
    console, screen = _terminal()
    dashboard = LiveDashboard(console)
    events = [
        SweepStarted("data/runs/r", 2, 0, ("initial_window_size",), 0.9, 0.0),
        TrialStarted("t1", POINT, repetition=1, attempt=1),
        TrialFinished("t1", POINT, True, None, 0.05, 0.02, 40.0, t_mono_s=1.0),
        TrialStarted("t2", POINT, repetition=2, attempt=1),
        TrialFinished("t2", POINT, True, None, 0.07, 0.03, 60.0, t_mono_s=2.0),
    ]
    for event in events:
        dashboard.post(event)
    dashboard.close()
    drawn = screen.getvalue()
    for step in ("0/2 trials", "1/2 trials", "2/2 trials", "t1: initial_window_size=4096",
                 "t2: initial_window_size=4096, repetition 2"):  # fmt: skip
        assert step in drawn, step
