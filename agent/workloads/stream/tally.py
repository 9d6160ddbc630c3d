"""What a subscriber makes of the items it received, pure: distinct items, gaps in the sequence
numbers, repeats, and the publish -> receive latencies as mean, median, p99 and max.

Every transport delivers a subscription's items in order (one HTTP/2 stream, or polls one
after another), so an item numbered at or below the highest seen is a repeat (a poll that came
before the next publication), never a late arrival. Items are lost when a number is skipped,
before the first one received (numbering starts at `first_seq`, 0 for a push subscription), and
after the last one when the stream's end says more were published.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LatencySummary:
    mean_s: float
    p50_s: float
    p99_s: float
    max_s: float


def nearest_rank(ordered: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of sorted, non-empty values: the smallest value with at
    least `fraction` of them at or below it."""
    rank = max(1, math.ceil(fraction * len(ordered) - 1e-9))
    return ordered[rank - 1]


def summarise(latencies_s: Sequence[float]) -> LatencySummary | None:
    if not latencies_s:
        return None
    ordered = sorted(latencies_s)
    return LatencySummary(
        mean_s=math.fsum(ordered) / len(ordered),
        p50_s=nearest_rank(ordered, 0.50),
        p99_s=nearest_rank(ordered, 0.99),
        max_s=ordered[-1],
    )


class SequenceTally:
    def __init__(self, first_seq: int | None = 0) -> None:
        """`first_seq`: the number the subscription starts at, or None where the first item
        received starts the count (polling joins a publication already running)."""
        self.first_seq = first_seq
        self.highest: int | None = None
        self.received = 0
        self.repeated = 0
        self.gaps = 0  # items skipped before or between those received

    def add(self, seq: int) -> bool:
        """Counts one item; True if it is new."""
        if self.highest is None:
            start = seq if self.first_seq is None else self.first_seq
            self.gaps += max(0, seq - start)
        elif seq <= self.highest:
            self.repeated += 1
            return False
        else:
            self.gaps += seq - self.highest - 1
        self.highest = seq
        self.received += 1
        return True

    def lost(self, published: int | None = None) -> int:
        """Items skipped, and with the server's count of items `published` (numbered from
        `first_seq`), those after the last one received too."""
        if published is None or self.first_seq is None:
            return self.gaps
        after = self.first_seq - 1 if self.highest is None else self.highest
        return self.gaps + max(0, self.first_seq + published - 1 - after)
