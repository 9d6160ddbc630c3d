"""nghttpd's per-trial record from /proc samples: activity window, CPU split, bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.engines.nghttp2.accounting import ActivityTracker, trial_record
from agent.engines.nghttp2.procfs import CpuSample
from agent.trial_control import End

MS = 1_000_000


def sample(t_ms: float, runtime_ms: float, utime: int = 0, stime: int = 0,
           wchar: int | None = 0) -> CpuSample:  # fmt: skip
    return CpuSample(
        t_mono_ns=int(t_ms * MS),
        t_wall_ns=int(t_ms * MS) + 10**18,
        runtime_ns=int(runtime_ms * MS),
        utime_ticks=utime,
        stime_ticks=stime,
        wchar=wchar,
    )


def test_activity_window_is_first_to_last_move() -> None:
    tracker = ActivityTracker(0, 0)
    for t, runtime in [(1, 0), (2, 0), (3, 1.0), (4, 1.5), (5, 1.5), (6, 1.8), (7, 1.8)]:
        tracker.feed(t * MS, int(runtime * MS))
    # First move in (2, 3] ms after 1 ms of CPU: started in [2, 2] ms. Last in (5, 6] after
    # 0.3 ms: ended in [5.3, 6] ms.
    assert tracker.window() == (2 * MS, int(5.65 * MS))
    assert tracker.idle_for_ns(7 * MS) == 1 * MS


def test_no_activity_no_window() -> None:
    tracker = ActivityTracker(0, 5)
    tracker.feed(MS, 5)
    assert tracker.window() is None


@given(st.lists(st.tuples(st.integers(1, 5 * MS), st.integers(0, 5 * MS)), min_size=1))
def test_window_lies_within_the_moves_and_is_ordered(steps: list[tuple[int, int]]) -> None:
    tracker = ActivityTracker(0, 0)
    t = runtime = 0
    moves = []
    for dt, busy in steps:
        previous = t
        t += dt
        cpu = min(busy, dt)  # one thread cannot run longer than the interval
        runtime += cpu
        tracker.feed(t, runtime)
        if cpu:
            moves.append((previous, t))
    window = tracker.window()
    if not moves:
        assert window is None
        return
    assert window is not None
    start, end = window
    assert moves[0][0] <= start <= moves[0][1]
    assert moves[-1][0] <= end <= moves[-1][1]
    assert start <= end


def test_record_from_samples_and_the_clients_counts() -> None:
    begin = sample(0, 100, utime=10, stime=5, wchar=1000)
    end = sample(50, 130, utime=12, stime=6, wchar=8001000)
    built = trial_record(
        "t1",
        begin,
        end,
        (2 * MS, 42 * MS),
        End("t1", True, 8, 8),
        rss_peak_bytes=7 * 2**20,
        rss_reset=True,
        cpu_source="schedstat",
        poll_s=0.001,
    )
    assert built.cpu_s == 0.030
    assert abs(built.cpu_user_s - 0.020) < 1e-12  # 2 user ticks, 1 system tick
    record = built.to_dict()
    assert record["serve_s"] == 0.040
    assert record["cpu_pct"] == 75.0
    assert record["sent"] == {"bytes": 8_000_000, "frames": None, "frame_bytes": None}
    assert record["received"] is None
    assert (record["ok"], record["requests"], record["counts_from"]) == (True, 8, "client")
    assert record["t_mono_start_ns"] == 2 * MS and record["t_mono_end_ns"] == 42 * MS
    assert record["t_wall_start_ns"] == 10**18 + 2 * MS
    assert record["rss_peak_is_trial"] is True


def test_record_without_activity_or_ticks() -> None:
    begin = sample(0, 100, utime=0, stime=0, wchar=None)
    end = sample(5, 100, utime=0, stime=0, wchar=None)
    record = trial_record("t2", begin, end, None, None, rss_peak_bytes=None, rss_reset=False,
                          cpu_source="ticks", poll_s=0.001).to_dict()  # fmt: skip
    assert (record["ok"], record["serve_s"], record["cpu_pct"], record["sent"]) == (
        False,
        0.0,
        0.0,
        None,
    )
    assert record["requests"] is None and record["rss_peak_is_trial"] is False


def test_serve_time_is_never_below_the_cpu_time() -> None:
    begin, end = sample(0, 0, 1, 0), sample(10, 2, 1, 0)
    record = trial_record("t3", begin, end, (MS, MS), End("t3", True, 1, 1),
                          rss_peak_bytes=1, rss_reset=True, cpu_source="schedstat",
                          poll_s=0.001)  # fmt: skip
    assert record.serve_s == 0.002 and record.cpu_pct == 100.0
    assert record.cpu_user_s == 0.002  # the lifetime split when the trial had no whole tick


def test_the_poller_sees_a_busy_then_idle_counter() -> None:
    import time  # noqa: PLC0415

    from agent.engines.nghttp2.poller import ActivityPoller, wait_until_idle  # noqa: PLC0415

    start = time.monotonic_ns()
    busy_until = start + 20 * MS

    def runtime() -> int:  # a counter that moves for 20 ms, then stands still
        return min(time.monotonic_ns(), busy_until) - start

    poller = ActivityPoller(runtime, ActivityTracker(start, 0))
    time.sleep(0.03)
    poller.finish()
    finished = time.monotonic_ns()
    assert poller.settled
    window = poller.tracker.window()
    assert window is not None
    # Where exactly depends on when a loaded machine ran the thread; the order does not.
    assert start <= window[0] < busy_until <= finished
    assert window[0] <= window[1] <= finished
    assert wait_until_idle(lambda: 7)


def test_what_the_program_wrote_of_its_trace_is_not_counted_as_sent() -> None:
    begin = sample(0, 100, utime=10, stime=5, wchar=1000)
    end = sample(50, 130, utime=12, stime=6, wchar=8001000)
    record = trial_record("t4", begin, end, (MS, 2 * MS), End("t4", True, 8, 8),
                          rss_peak_bytes=1, rss_reset=True, cpu_source="schedstat",
                          poll_s=0.001, trace_bytes=250_000)  # fmt: skip
    assert record.bytes_sent == 8_000_000 - 250_000
