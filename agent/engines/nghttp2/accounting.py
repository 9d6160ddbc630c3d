"""nghttpd's per-trial figures from samples of its /proc accounting. Pure.

A trial's window is bracketed by the client's trial-control messages (agent.trial_control);
nghttpd is idle at both brackets (one trial at a time), so the CPU time, bytes written and peak
RSS between them are the trial's. `serve_s` is narrower: the span over which nghttpd's CPU
counter moved, sampled every poll period; each end is estimated inside its poll interval (the
midpoint of where it can lie, given the CPU time spent in that interval), so it is good to about
half a poll period, and it runs from the connection's accept to its close (about one round trip
beyond the h2 engine's last byte).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.engines.nghttp2.procfs import CpuSample
from agent.trial_control import End
from agent.workloads.page.spec import PAGE


class ActivityTracker:
    """When a process's CPU counter first and last moved, from polled (time, runtime) pairs."""

    def __init__(self, t_ns: int, runtime_ns: int) -> None:
        self._previous = (t_ns, runtime_ns)
        self.first: tuple[int, int, int] | None = None  # (t_before, t_after, cpu_ns in between)
        self.last: tuple[int, int, int] | None = None
        self.last_change_ns = t_ns

    def feed(self, t_ns: int, runtime_ns: int) -> None:
        t_before, runtime_before = self._previous
        if runtime_ns != runtime_before:
            interval = (t_before, t_ns, runtime_ns - runtime_before)
            if self.first is None:
                self.first = interval
            self.last = interval
            self.last_change_ns = t_ns
        self._previous = (t_ns, runtime_ns)

    def idle_for_ns(self, t_ns: int) -> int:
        return t_ns - self.last_change_ns

    def window(self) -> tuple[int, int] | None:
        """(start, end) of the activity in ns, or None if the counter never moved."""
        if self.first is None or self.last is None:
            return None
        t0, t1, cpu = self.first
        # It started no earlier than t0 and, having spent `cpu` before t1, no later than t1 - cpu.
        start = (t0 + max(t0, t1 - cpu)) // 2
        t0, t1, cpu = self.last
        end = (min(t1, t0 + cpu) + t1) // 2
        return start, max(end, start)


@dataclass(frozen=True)
class NghttpdTrialRecord:
    trial_id: str
    ok: bool
    requests: int | None
    responses_completed: int | None
    serve_s: float
    cpu_user_s: float
    cpu_sys_s: float
    cpu_s: float
    cpu_pct: float
    rss_peak_bytes: int | None
    rss_peak_is_trial: bool
    bytes_sent: int | None
    t_wall_start_ns: int
    t_wall_end_ns: int
    t_mono_start_ns: int
    t_mono_end_ns: int
    cpu_source: str
    poll_s: float

    def to_dict(self) -> dict[str, object]:
        """The h2 engine's trial-log fields (agent/README.md), null where nghttpd cannot tell,
        plus where this engine's figures come from."""
        return {
            "trial_id": self.trial_id,
            "ok": self.ok,
            "requests": self.requests,
            "responses_completed": self.responses_completed,
            "streams_reset": None,
            "serve_s": self.serve_s,
            "cpu_user_s": self.cpu_user_s,
            "cpu_sys_s": self.cpu_sys_s,
            "cpu_s": self.cpu_s,
            "cpu_pct": self.cpu_pct,
            "rss_peak_bytes": self.rss_peak_bytes,
            "rss_peak_is_trial": self.rss_peak_is_trial,
            "sent": None
            if self.bytes_sent is None
            else {"bytes": self.bytes_sent, "frames": None, "frame_bytes": None},
            "received": None,
            "t_wall_start_ns": self.t_wall_start_ns,
            "t_wall_end_ns": self.t_wall_end_ns,
            "t_mono_start_ns": self.t_mono_start_ns,
            "t_mono_end_ns": self.t_mono_end_ns,
            "overlapping_trials": [],
            "engine": "nghttp2",
            "workload": PAGE.kind,  # nghttpd serves files only: the page workload's
            "counts_from": "client",
            "cpu_source": self.cpu_source,
            "serve_resolution_s": self.poll_s,
        }


def _user_share(begin: CpuSample, end: CpuSample) -> float:
    """utime's share of CPU time over the trial in clock ticks, or over nghttpd's life when the
    trial was shorter than a tick, as getrusage splits its nanosecond total."""
    user, system = end.utime_ticks - begin.utime_ticks, end.stime_ticks - begin.stime_ticks
    if user + system == 0:
        user, system = end.utime_ticks, end.stime_ticks
    return user / (user + system) if user + system else 1.0


def trial_record(
    trial_id: str,
    begin: CpuSample,
    end: CpuSample,
    activity: tuple[int, int] | None,
    client: End | None,
    *,
    rss_peak_bytes: int | None,
    rss_reset: bool,
    cpu_source: str,
    poll_s: float,
    trace_bytes: int = 0,
) -> NghttpdTrialRecord:
    """`trace_bytes`: what the program wrote of its event trace between the samples (nghttpd
    -v's frame log, gtlsserver's qlog), which its write(2) total counts but its socket did not
    send."""
    cpu_s = (end.runtime_ns - begin.runtime_ns) / 1e9
    share = _user_share(begin, end)
    start_ns, end_ns = activity if activity is not None else (begin.t_mono_ns, begin.t_mono_ns)
    serve_s = max((end_ns - start_ns) / 1e9, cpu_s) if activity is not None else 0.0
    written = None
    if begin.wchar is not None and end.wchar is not None:
        written = end.wchar - begin.wchar - trace_bytes
    return NghttpdTrialRecord(
        trial_id=trial_id,
        ok=client is not None and client.ok and activity is not None,
        requests=None if client is None else client.requests,
        responses_completed=None if client is None else client.responses_completed,
        serve_s=serve_s,
        cpu_user_s=cpu_s * share,
        cpu_sys_s=cpu_s * (1 - share),
        cpu_s=cpu_s,
        cpu_pct=100.0 * cpu_s / serve_s if serve_s > 0 else 0.0,
        rss_peak_bytes=rss_peak_bytes,
        rss_peak_is_trial=rss_reset and rss_peak_bytes is not None,
        bytes_sent=written,
        t_wall_start_ns=begin.t_wall_ns + (start_ns - begin.t_mono_ns),
        t_wall_end_ns=begin.t_wall_ns + (start_ns - begin.t_mono_ns) + int(serve_s * 1e9),
        t_mono_start_ns=start_ns,
        t_mono_end_ns=start_ns + int(serve_s * 1e9),
        cpu_source=cpu_source,
        poll_s=poll_s,
    )
