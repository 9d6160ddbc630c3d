"""What a subscriber makes of the items it received, pure: distinct items, gaps in the sequence
numbers, repeats, and the publish -> receive latencies as mean, median, p99 and max.

Every transport delivers a subscription's items in order (one HTTP/2 stream, or polls one
after another), so an item numbered at or below the highest seen is a repeat (a poll that came
before the next publication), never a late arrival. Items are lost when a number is skipped,
before the first one received (numbering starts at `first_seq`, 0 for a push subscription), and
after the last one when the stream's end says more were published.

A latency subtracts the server's publish stamp (its wall clock) from the arrival (ours); between
two hosts the stamp is first mapped onto our clock through the measured offset between them, so
the latency is exact within that offset's uncertainty.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from agent.workloads.stream.errors import ItemError
from agent.workloads.stream.item import StreamEnd, Tune


@dataclass(frozen=True)
class LatencySummary:
    mean_s: float
    p50_s: float
    p99_s: float
    max_s: float


def latency_ns(t_publish_ns: int, t_receive_ns: int, peer_offset_ns: int) -> int:
    """Publish -> receive on our clock: the server's stamp `t_publish_ns` read on ours, where
    `peer_offset_ns` is the server's wall clock minus ours. Integers, so the mapping is exact."""
    return t_receive_ns - (t_publish_ns - peer_offset_ns)


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


class Reception:
    """Everything a subscriber received, and its record's fields."""

    def __init__(
        self, payload_doubles: int, first_seq: int | None = 0, peer_offset_ns: int = 0
    ) -> None:
        """`peer_offset_ns`: the server's wall clock minus ours (0: the same clock)."""
        self.payload_doubles = payload_doubles
        self.sequence = SequenceTally(first_seq)
        self.peer_offset_ns = peer_offset_ns
        self.latencies_s: list[float] = []
        self.payload_bytes = 0
        self.dropped = 0  # the server's count, as of the latest item or the end
        self.end: StreamEnd | None = None

    def item(self, item: Tune, size_bytes: int, t_receive_ns: int) -> None:
        """One item, `size_bytes` as it was encoded, received at the client's wall clock."""
        if len(item.doubles) != self.payload_doubles:
            raise ItemError(
                f"item {item.seq} carries {len(item.doubles)} doubles, "
                f"{self.payload_doubles} were asked for"
            )
        self.payload_bytes += size_bytes
        if self.sequence.add(item.seq):
            latency = latency_ns(item.t_publish_ns, t_receive_ns, self.peer_offset_ns)
            self.latencies_s.append(latency / 1e9)
        self.dropped = max(self.dropped, item.dropped)

    def ended(self, end: StreamEnd) -> None:
        if self.end is not None:
            raise ItemError("a second end of the stream")
        self.end = end
        self.dropped = end.dropped

    def metrics(self, demanded_rate_hz: float, subscription_s: float | None) -> dict[str, object]:
        """The workload's fields (agent.workloads.stream.spec)."""
        summary = summarise(self.latencies_s)
        received = self.sequence.received
        published = None if self.end is None else self.end.published
        return {
            "demanded_rate_hz": demanded_rate_hz,
            "received_rate_hz": received / subscription_s if subscription_s else None,
            "items_published": published,
            "items_received": received,
            "items_dropped": self.dropped,
            "items_lost": self.sequence.lost(published),
            "items_repeated": self.sequence.repeated,
            "latency_mean_s": summary and summary.mean_s,
            "latency_p50_s": summary and summary.p50_s,
            "latency_p99_s": summary and summary.p99_s,
            "latency_max_s": summary and summary.max_s,
            "payload_bytes": self.payload_bytes,
            "subscription_s": subscription_s,
        }
