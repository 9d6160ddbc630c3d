"""The process's own accounting: CPU time (user, sys), peak RSS, clocks.

CPU time comes from getrusage, the kernel's per-process accounting (not from sampling `top`, as
the study did). Peak RSS over a window uses Linux's resettable high-water mark: writing "5" to
/proc/self/clear_refs resets VmHWM, so a trial's peak is its own and not the process's lifetime
peak. Where that is unavailable the lifetime peak (ru_maxrss) is reported and flagged.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")
_RESET_PEAK_RSS = b"5"


@dataclass(frozen=True)
class ProbeSample:
    t_mono_ns: int
    t_wall_ns: int
    cpu_user_s: float
    cpu_sys_s: float


@dataclass(frozen=True)
class ProbeSpan:
    """What one process spent between two samples."""

    start: ProbeSample
    end: ProbeSample
    rss_peak_bytes: int
    rss_peak_is_window: bool

    @property
    def duration_s(self) -> float:
        return (self.end.t_mono_ns - self.start.t_mono_ns) / 1e9

    @property
    def cpu_user_s(self) -> float:
        return self.end.cpu_user_s - self.start.cpu_user_s

    @property
    def cpu_sys_s(self) -> float:
        return self.end.cpu_sys_s - self.start.cpu_sys_s

    @property
    def cpu_s(self) -> float:
        return self.cpu_user_s + self.cpu_sys_s

    @property
    def cpu_pct(self) -> float:
        """CPU time over elapsed time, in percent of one core."""
        duration = self.duration_s
        return 100.0 * self.cpu_s / duration if duration > 0 else 0.0


def sample() -> ProbeSample:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return ProbeSample(
        t_mono_ns=time.monotonic_ns(),
        t_wall_ns=time.time_ns(),
        cpu_user_s=usage.ru_utime,
        cpu_sys_s=usage.ru_stime,
    )


class _HeldPeak:
    """The peak before the inner windows' resets (`reset_inner_peak_rss`), which the window
    they sit in must keep: the kernel has one mark per process."""

    bytes = 0


def _write_clear_refs() -> bool:
    try:
        with _CLEAR_REFS.open("wb", buffering=0) as handle:
            handle.write(_RESET_PEAK_RSS)
    except OSError:
        return False
    return True


def reset_peak_rss() -> bool:
    """Start a new peak-RSS window (a trial's); False where the kernel does not allow it."""
    _HeldPeak.bytes = 0
    return _write_clear_refs()


def reset_inner_peak_rss() -> bool:
    """Reset the mark for a window inside the current one (one message's parse, read raw from
    VmHWM after it) while `peak_rss_bytes` keeps the current window's peak so far."""
    _HeldPeak.bytes = max(_HeldPeak.bytes, _vm_hwm_bytes() or 0)
    return _write_clear_refs()


def _vm_hwm_bytes() -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int:
    """The peak resident set size since the last window's reset (VmHWM, and what inner resets
    held), else the lifetime peak."""
    hwm = _vm_hwm_bytes()
    if hwm is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return max(hwm, _HeldPeak.bytes)


class ProbeWindow:
    """Open at the start of a trial, close at its end; also times its own overhead."""

    def __init__(self) -> None:
        t0 = time.perf_counter()
        self.rss_peak_is_window = reset_peak_rss()
        self.start = sample()
        self.overhead_s = time.perf_counter() - t0

    def close(self) -> ProbeSpan:
        t0 = time.perf_counter()
        end = sample()
        rss = peak_rss_bytes()
        self.overhead_s += time.perf_counter() - t0
        return ProbeSpan(self.start, end, rss, self.rss_peak_is_window)
