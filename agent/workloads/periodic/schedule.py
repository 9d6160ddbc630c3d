"""When each exchange of a trial is due, pure: on the client's monotonic clock, from the
trial's start, never shifted by a late one.

Exchange i is due at i * interval_s, moved by a uniform draw in +-jitter_s from a generator
seeded by the trial's id (a repetition of a trial draws the same moves); the first is due at
the start itself, no move puts an exchange before the start, and the exchanges go in the order
their times fall. An exchange that starts after
it was due (the node was busy, the previous exchange ran long) is late by the difference:
recorded, and the next keeps its own time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_NS = 1_000_000_000
LATE_S = 0.01
"""An exchange counts as late (the record's `late_exchanges`) from this lateness on: the event
loop wakes a timer up to a millisecond or so after it is due, which is no node's business."""


@dataclass(frozen=True)
class Schedule:
    count: int
    interval_s: float
    jitter_s: float = 0.0

    def due_ns(self, seed: str) -> tuple[int, ...]:
        """Each exchange's due time, ns after the trial's start, in time order (a jitter over
        half the interval can move one past the next: they are taken in the order they fall)."""
        draw = random.Random(seed)
        due = [0]
        for index in range(1, self.count):
            move = draw.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0
            due.append(max(0, round((index * self.interval_s + move) * _NS)))
        return tuple(sorted(due))


def is_late(lateness: float) -> bool:
    return lateness >= LATE_S


def lateness_s(due_mono_ns: int, start_mono_ns: int) -> float:
    """How late an exchange started, s; 0 for one on time (a start is never early: the client
    waits for the due time)."""
    return max(0, start_mono_ns - due_mono_ns) / _NS
