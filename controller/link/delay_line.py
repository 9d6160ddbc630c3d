"""A fixed one-way delay for frames, and how late they actually left (sans-IO).

`DelayLine` is one direction of the userspace relay (`controller.link.relay`): frames go in
with the time they arrived and come out, in order, once `delay_ns` has passed. `Lateness`
counts how far after its due time each frame was handed on, in 10 us steps, so the run can say
how exact the delay was (the relay is a process on a shared machine, not a wire).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

LATENESS_STEP_NS = 10_000
LATENESS_STEPS = 1000  # up to 10 ms in steps; later ones share the last step


@dataclass(frozen=True)
class LatenessSummary:
    frames: int
    median_us: float
    p99_us: float
    max_us: float


class Lateness:
    """A histogram of how late frames left, and the latest one exactly."""

    def __init__(self) -> None:
        self._counts = [0] * LATENESS_STEPS
        self.frames = 0
        self.max_ns = 0

    def add(self, late_ns: int) -> None:
        self._counts[min(late_ns // LATENESS_STEP_NS, LATENESS_STEPS - 1)] += 1
        self.frames += 1
        self.max_ns = max(self.max_ns, late_ns)

    def quantile_us(self, q: float) -> float:
        """The upper edge of the step holding the q-quantile (0 without frames)."""
        if not self.frames:
            return 0.0
        wanted = max(1, round(q * self.frames))
        seen = 0
        for step, count in enumerate(self._counts):
            seen += count
            if seen >= wanted:
                return min((step + 1) * LATENESS_STEP_NS, self.max_ns) / 1000
        return self.max_ns / 1000

    def summary(self) -> LatenessSummary:
        return LatenessSummary(
            self.frames, self.quantile_us(0.5), self.quantile_us(0.99), self.max_ns / 1000
        )


class DelayLine:
    """Frames in arrival order, each due `delay_ns` after it arrived."""

    def __init__(self, delay_ns: int) -> None:
        if delay_ns < 0:
            raise ValueError(f"delay {delay_ns} ns: must not be negative")
        self.delay_ns = delay_ns
        self._queue: deque[tuple[int, bytes]] = deque()
        self.most_queued = 0

    def push(self, frame: bytes, arrived_ns: int) -> None:
        self._queue.append((arrived_ns + self.delay_ns, frame))
        self.most_queued = max(self.most_queued, len(self._queue))

    def next_due_ns(self) -> int | None:
        return self._queue[0][0] if self._queue else None

    def pop_due(self, now_ns: int) -> Iterator[tuple[bytes, int]]:
        """The frames due by `now_ns`, oldest first, each with how late it is (ns)."""
        queue = self._queue
        while queue and queue[0][0] <= now_ns:
            due, frame = queue.popleft()
            yield frame, now_ns - due

    def __len__(self) -> int:
        return len(self._queue)
