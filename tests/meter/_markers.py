"""Marker edges through a meter's FIFO, checked against the board's own sample count.

A marker is stamped with the board's sample count at the edge (the first sample at or after
it). A STATUS asked for before the edge is written reports a count taken before the edge, and one
asked for after the edge's MARKER frame has arrived a count taken after it: the stamp lies
between them however late any process is scheduled. Gaps between edges are counted in samples
the board has taken, never in wall-clock sleeps, for the same reason.
"""

from __future__ import annotations

import os
import time

from controller.meter.session import MeterSession

_HANG_S = 60.0  # a guard against a hang, not a timing assertion


def stamped_edge(meter: MeterSession, fd: int, edge: int) -> int:
    """Write edge to the marker FIFO; its MARKER's sample index, checked to lie between the
    board's sample counts before the write and after the MARKER arrived."""
    taken_before = meter.get_status().samples_taken
    seen = meter.marker_count
    os.write(fd, f"{edge}\n".encode())
    deadline = time.monotonic() + _HANG_S
    while meter.marker_count == seen:
        assert time.monotonic() < deadline, f"no MARKER for edge {edge}"
        time.sleep(0.01)
    taken_after = meter.get_status().samples_taken
    (marker,) = meter.markers(seen)
    assert marker.marker.edge == edge
    assert taken_before <= marker.sample_index <= taken_after
    return marker.sample_index


def wait_until_taken(meter: MeterSession, samples: int) -> None:
    """Return once the board has taken at least `samples` samples of the run (some have
    arrived: a board cannot send a sample before taking it)."""
    deadline = time.monotonic() + _HANG_S
    while meter.samples.next_index < samples:
        assert time.monotonic() < deadline, f"fewer than {samples} samples arrived"
        time.sleep(0.01)
