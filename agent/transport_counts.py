"""A trial's QUIC transport counts (its records' `transport`, agent/README.md) over the several
connections it may open (the periodic workload's new or resumed connection per exchange), from
each connection's own record. Pure.

Counts add up (a count one connection could not measure makes the sum unknown: None); the
largest credits ahead are the largest of any connection's (None where none granted); every
other field (the protocol, the configured windows and ACK policy, the socket's buffers, the
smoothed RTT) is the latest connection's, as is a trial of one connection's record. A merged
record says how many connections it covers (`connections`).
"""

from __future__ import annotations

from collections.abc import Mapping

SUMMED = (
    "packets_lost",
    "pto_count",
    "udp_rcvbuf_errors",
    "capacity_blocked",
    "max_stream_data_frames",
    "max_data_frames",
)
LARGEST = ("largest_stream_credit_ahead_bytes", "largest_connection_credit_ahead_bytes")


def _sum(a: object, b: object) -> object:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return None


def _largest(a: object, b: object) -> object:
    present = [v for v in (a, b) if isinstance(v, int)]
    return max(present) if present else None


def merged(
    earlier: Mapping[str, object] | None, latest: Mapping[str, object] | None
) -> dict[str, object] | None:
    """`latest`'s record with `earlier`'s (the trial's connections before it, merged) added;
    either alone where the other is None."""
    if latest is None:
        return None if earlier is None else dict(earlier)
    if earlier is None:
        return {**latest, "connections": 1}
    record = dict(latest)
    for name in SUMMED:
        if name in earlier or name in latest:
            record[name] = _sum(earlier.get(name), latest.get(name))
    for name in LARGEST:
        if name in earlier or name in latest:
            record[name] = _largest(earlier.get(name), latest.get(name))
    count = earlier.get("connections", 1)
    record["connections"] = (count if isinstance(count, int) else 1) + 1
    return record
