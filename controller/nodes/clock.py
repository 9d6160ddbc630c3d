"""Clock offset between the controller and a node from timed round trips (pure).

Each round trip reads the local clock (t0), asks the node for its clock (r), and reads the local
clock again (t1). The node read its clock at some local instant within [t0, t1], so the offset
r - t_local lies within [r - t1, r - t0]. Intersecting those intervals over the quarter of the
samples with the shortest round trips gives the offset with a bound that holds as long as both
clocks run at the same rate over the fraction of a second the measurement takes; when scheduling
noise makes the intervals disjoint, the single shortest round trip decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.nodes.records import ClockOffset


@dataclass(frozen=True)
class Reading:
    """One clock in one round trip: local before, node, local after (ns)."""

    send_ns: int
    remote_ns: int
    receive_ns: int

    @property
    def interval(self) -> tuple[int, int]:
        """The offsets (node minus local) this reading allows."""
        return self.remote_ns - self.receive_ns, self.remote_ns - self.send_ns


@dataclass(frozen=True)
class RoundTrip:
    """One exchange read on both the wall and the monotonic clock."""

    wall: Reading
    mono: Reading

    @property
    def round_trip_ns(self) -> int:
        return self.mono.receive_ns - self.mono.send_ns


def parse_reply(line: bytes) -> tuple[int, int]:
    """The node's `WALL MONO` reply line as two ints; ValueError if it is anything else."""
    wall, mono = line.split()
    return int(wall), int(mono)


def estimate(readings: Sequence[Reading]) -> tuple[int, int]:
    """(offset_ns, uncertainty_ns) from readings ordered by round trip, shortest first."""
    low = max(reading.interval[0] for reading in readings)
    high = min(reading.interval[1] for reading in readings)
    if low > high:
        low, high = readings[0].interval
    middle = (low + high) // 2
    return middle, max(middle - low, high - middle)


def clock_offset(samples: Sequence[RoundTrip]) -> ClockOffset:
    """The wall and monotonic offsets (node minus controller) with one shared uncertainty."""
    if not samples:
        raise ValueError("no clock samples")
    ordered = sorted(samples, key=lambda sample: sample.round_trip_ns)
    best = ordered[: max(1, len(ordered) // 4)]
    wall, wall_error = estimate([sample.wall for sample in best])
    mono, mono_error = estimate([sample.mono for sample in best])
    return ClockOffset(
        wall_offset_ns=wall,
        monotonic_offset_ns=mono,
        uncertainty_ns=max(wall_error, mono_error),
        best_round_trip_ns=ordered[0].round_trip_ns,
        samples=len(samples),
    )


@dataclass(frozen=True)
class PeerOffset:
    """One clock minus another (wall clocks, ns), within +/- `uncertainty_ns`."""

    offset_ns: int
    uncertainty_ns: int

    @classmethod
    def of_node(cls, clock: Mapping[str, Any] | None) -> PeerOffset | None:
        """A node's wall clock minus the controller's, from its facts' `clock` (a
        `ClockOffset` as a dict); None when it was not measured."""
        if not clock:
            return None
        return cls(int(clock["wall_offset_ns"]), int(clock["uncertainty_ns"]))

    def minus(self, other: PeerOffset) -> PeerOffset:
        """This node's clock minus `other`'s, both measured against the controller's: the
        controller's clock cancels, and the two bounds add."""
        return PeerOffset(
            self.offset_ns - other.offset_ns, self.uncertainty_ns + other.uncertainty_ns
        )
