"""The samples of one run (since START), kept with their sample indices and arrival times.

The reader thread appends SAMPLES frames; anyone may read windows concurrently (one lock). Values
live in one growable (n, channels) array; a small table keeps, per frame, its first (unwrapped)
sample index, its row in that array and when its last byte arrived (`time.monotonic_ns`).
The device's u32 index wraps after 2**32 samples; indices here keep counting. A frame is placed at
the nearest index at or ahead of what has arrived, on the u32 ring: a wrap is a step forward like
any other. A frame more than `MAX_JUMP_SAMPLES` ahead, or behind what arrived (a duplicate, a
board that restarted its count), is not a plausible continuation: it is refused and counted
(`jumped_frames`), so one bad index can neither invent billions of missing samples nor a wrap.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.meter.protocol import SAMPLE_INDEX_MODULUS, SampleArray, Samples

IntArray = npt.NDArray[np.int64]
_INITIAL_ROWS = 4096
MAX_JUMP_SAMPLES = 1 << 24
"""The largest forward gap taken as samples lost: 28 min at 10 kHz, far beyond any stall of a
link whose board keeps sampling (its drops leave gaps), far below a u32 counter's range."""


@dataclass(frozen=True, slots=True)
class SampleWindow:
    """Samples with index in [first_index, end_index): `values[i]` is sample `indices[i]`."""

    indices: IntArray
    values: SampleArray
    first_index: int
    end_index: int

    @property
    def missing(self) -> int:
        """Samples of the span that never arrived (lost on the link or dropped by the device)."""
        return self.end_index - self.first_index - len(self.indices)


class SampleStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: SampleArray = np.empty((0, 0), dtype=np.uint16)
        self._rows = 0
        self._frame_first: IntArray = np.empty(0, dtype=np.int64)
        self._frame_row: IntArray = np.empty(0, dtype=np.int64)
        self._frame_t_ns: IntArray = np.empty(0, dtype=np.int64)
        self._frames = 0
        self._next_index = 0
        self._missing = 0
        self._mismatched = 0
        self._jumped = 0

    @property
    def channel_count(self) -> int:
        return int(self._values.shape[1])

    @property
    def received(self) -> int:
        return self._rows

    @property
    def missing(self) -> int:
        """Sample indices skipped between received frames."""
        return self._missing

    @property
    def next_index(self) -> int:
        """One past the highest sample index received."""
        return self._next_index

    @property
    def mismatched_frames(self) -> int:
        """Frames ignored because their channel count differs from the run's first frame."""
        return self._mismatched

    @property
    def jumped_frames(self) -> int:
        """Frames refused because their index jumped (see the module doc)."""
        return self._jumped

    def add(self, frame: Samples, t_mono_ns: int) -> None:
        with self._lock:
            if self._rows == 0 and self._frames == 0:
                self._values = np.empty((_INITIAL_ROWS, frame.channel_count), dtype=np.uint16)
            elif frame.channel_count != self.channel_count:
                self._mismatched += 1
                return
            ahead = (frame.first_sample_index - self._next_index) % SAMPLE_INDEX_MODULUS
            if ahead > MAX_JUMP_SAMPLES:
                self._jumped += 1
                return
            first = self._next_index + ahead
            self._missing += ahead
            self._grow(frame.count)
            self._values[self._rows : self._rows + frame.count] = frame.values
            self._frame_first[self._frames] = first
            self._frame_row[self._frames] = self._rows
            self._frame_t_ns[self._frames] = t_mono_ns
            self._frames += 1
            self._rows += frame.count
            self._next_index = first + frame.count

    def window(self, first_index: int, end_index: int) -> SampleWindow:
        """Copies of the samples with index in [first_index, end_index)."""
        with self._lock:
            starts = self._frame_first[: self._frames]
            rows = self._frame_row[: self._frames]
            counts = np.diff(np.append(rows, self._rows))
            lo = max(0, int(np.searchsorted(starts, first_index, side="right")) - 1)
            hi = int(np.searchsorted(starts, end_index, side="left"))
            if hi <= lo:
                indices = np.empty(0, dtype=np.int64)
                values = np.empty((0, self.channel_count), dtype=np.uint16)
                return SampleWindow(indices, values, first_index, end_index)
            # row r of frame f holds sample starts[f] + (r - rows[f])
            row_first, row_end = int(rows[lo]), int(rows[hi - 1] + counts[hi - 1])
            offsets = np.repeat(starts[lo:hi] - rows[lo:hi], counts[lo:hi])
            indices = offsets + np.arange(row_first, row_end, dtype=np.int64)
            values = self._values[row_first:row_end]
            keep = (indices >= first_index) & (indices < end_index)
            return SampleWindow(indices[keep], values[keep].copy(), first_index, end_index)

    def all(self) -> SampleWindow:
        return self.window(0, self._next_index)

    def arrivals(self) -> tuple[IntArray, IntArray]:
        """(index of each frame's last sample, monotonic ns when its last byte was read)."""
        with self._lock:
            rows = self._frame_row[: self._frames]
            counts = np.diff(np.append(rows, self._rows))
            last = self._frame_first[: self._frames] + counts - 1
            return last.copy(), self._frame_t_ns[: self._frames].copy()

    def _grow(self, rows: int) -> None:
        if self._rows + rows > len(self._values):
            size = max(2 * len(self._values), self._rows + rows)
            bigger = np.empty((size, self.channel_count), dtype=np.uint16)
            bigger[: self._rows] = self._values[: self._rows]
            self._values = bigger
        if self._frames == len(self._frame_first):
            size = max(2 * self._frames, 256)
            for name in ("_frame_first", "_frame_row", "_frame_t_ns"):
                table = np.zeros(size, dtype=np.int64)
                table[: self._frames] = getattr(self, name)[: self._frames]
                setattr(self, name, table)
