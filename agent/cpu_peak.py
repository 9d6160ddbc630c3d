"""A process's CPU use as a peak over short intervals, beside the mean a trial's span gives: the
reference's "peak CPU" (JMeter's PerfMon, 100 % = one core) where the mean hides bursts.

`CpuPeak` is pure: fed (monotonic ns, process CPU ns) pairs, it keeps the highest CPU % over
any interval of at least `interval_ns` between feeds (a shorter gap is folded into the next, so
a feed that happens to come early never yields a noisy 5 ms "peak"). `CpuSampler` is its thin
asyncio shell: while any meter is open it feeds them all every interval with
`time.process_time_ns()` (the kernel's CPU clock of the whole process, every thread, in ns; no
/proc parsing and no clock-tick rounding). An event loop too busy to wake the sampler on time
makes an interval longer, never wrong: each is CPU spent over the time that really passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

INTERVAL_S = 0.1


class CpuPeak:
    def __init__(self, t_ns: int, cpu_ns: int, interval_ns: int = int(INTERVAL_S * 1e9)) -> None:
        self.interval_ns = interval_ns
        self._start = (t_ns, cpu_ns)
        self._base = (t_ns, cpu_ns)
        self._last = (t_ns, cpu_ns)
        self.peak_pct: float | None = None  # None until a whole interval has passed
        self.intervals = 0

    def feed(self, t_ns: int, cpu_ns: int) -> None:
        self._last = (t_ns, cpu_ns)
        base_t, base_cpu = self._base
        elapsed = t_ns - base_t
        if elapsed < self.interval_ns:
            return
        pct = 100.0 * (cpu_ns - base_cpu) / elapsed
        self.peak_pct = pct if self.peak_pct is None else max(self.peak_pct, pct)
        self.intervals += 1
        self._base = (t_ns, cpu_ns)

    @property
    def mean_pct(self) -> float | None:
        """CPU % over everything fed so far, None before any time passed."""
        (t0, cpu0), (t1, cpu1) = self._start, self._last
        return 100.0 * (cpu1 - cpu0) / (t1 - t0) if t1 > t0 else None

    def result(self) -> float | None:
        """The peak; a span shorter than one interval has only its mean to offer."""
        return self.peak_pct if self.peak_pct is not None else self.mean_pct


def now() -> tuple[int, int]:
    return time.monotonic_ns(), time.process_time_ns()


class CpuSampler:
    """Feeds every open `CpuPeak` each interval, on the running loop, while any is open."""

    def __init__(
        self, interval_s: float = INTERVAL_S, clock: Callable[[], tuple[int, int]] = now
    ) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._open: dict[str, CpuPeak] = {}
        self._task: asyncio.Task[None] | None = None

    def open(self, key: str) -> None:
        self._open[key] = CpuPeak(*self.clock(), int(self.interval_s * 1e9))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def close(self, key: str) -> float | None:
        """The key's peak CPU % (fed once more, now), None if it was never opened."""
        meter = self._open.pop(key, None)
        if meter is None:
            return None
        meter.feed(*self.clock())
        if not self._open and self._task is not None:
            self._task.cancel()
            self._task = None
        return meter.result()

    async def _run(self) -> None:
        while self._open:
            await asyncio.sleep(self.interval_s)
            sample = self.clock()
            for meter in self._open.values():
                meter.feed(*sample)
