"""The samples of one run (since START), kept with their sample indices and arrival times.

The reader thread appends SAMPLES frames; anyone may read windows concurrently (one lock). Values
live in one growable (n, channels) table; a small table keeps, per frame, its first (unwrapped)
sample index, the number of its first row and when its last byte arrived (`time.monotonic_ns`).
A run of hours would hold every sample it took; `release_before(index)` forgets the samples
below an index no later read needs (the sweep's tap calls it as each trial begins) and the
frames wholly below it (`controller.meter.held`): memory follows what is held, while indices,
row numbers and counters (`received`, `missing`) go on as if nothing was forgotten.
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

from controller.meter.held import HeldRows
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
        self._values: HeldRows | None = None  # shaped by the run's first frame
        # Per frame: its first sample index, the number of its first row in `_values`, and
        # when its last byte arrived.
        self._frames = HeldRows(3, np.int64)
        self._next_index = 0
        self._released = 0
        self._received = 0
        self._missing = 0
        self._mismatched = 0
        self._jumped = 0

    @property
    def channel_count(self) -> int:
        return 0 if self._values is None else self._values.width

    @property
    def received(self) -> int:
        """Samples received over the run (released ones too)."""
        return self._received

    @property
    def missing(self) -> int:
        """Sample indices skipped between received frames."""
        return self._missing

    @property
    def next_index(self) -> int:
        """One past the highest sample index received."""
        return self._next_index

    @property
    def released_index(self) -> int:
        """Samples below this index are forgotten (`release_before`); windows start no lower."""
        return self._released

    @property
    def held_samples(self) -> int:
        return 0 if self._values is None else self._values.held

    @property
    def held_bytes(self) -> int:
        """The bytes of the arrays holding samples and their frames, unused room included."""
        values = 0 if self._values is None else self._values.nbytes
        return values + self._frames.nbytes

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
            if self._values is None:
                self._values = HeldRows(frame.channel_count, np.uint16, _INITIAL_ROWS)
            elif frame.channel_count != self._values.width:
                self._mismatched += 1
                return
            ahead = (frame.first_sample_index - self._next_index) % SAMPLE_INDEX_MODULUS
            if ahead > MAX_JUMP_SAMPLES:
                self._jumped += 1
                return
            first = self._next_index + ahead
            self._missing += ahead
            self._frames.extend([[first, self._values.appended, t_mono_ns]])
            self._values.extend(frame.values)
            self._received += frame.count
            self._next_index = first + frame.count

    def window(self, first_index: int, end_index: int) -> SampleWindow:
        """Copies of the samples with index in [first_index, end_index), the span starting no
        lower than `released_index`."""
        with self._lock:
            first_index = max(first_index, self._released)
            end_index = max(end_index, first_index)
            starts, rows, counts = self._held_frames()
            lo = max(0, int(np.searchsorted(starts, first_index, side="right")) - 1)
            hi = int(np.searchsorted(starts, end_index, side="left"))
            if hi <= lo or self._values is None:
                indices = np.empty(0, dtype=np.int64)
                values = np.empty((0, self.channel_count), dtype=np.uint16)
                return SampleWindow(indices, values, first_index, end_index)
            # row r of frame f holds sample starts[f] + (r - rows[f])
            row_first, row_end = int(rows[lo]), int(rows[hi - 1] + counts[hi - 1])
            offsets = np.repeat(starts[lo:hi] - rows[lo:hi], counts[lo:hi])
            indices = offsets + np.arange(row_first, row_end, dtype=np.int64)
            held = self._values.rows()[
                row_first - self._values.first : row_end - self._values.first
            ]
            keep = (indices >= first_index) & (indices < end_index)
            return SampleWindow(indices[keep], held[keep].copy(), first_index, end_index)

    def all(self) -> SampleWindow:
        """Every sample held."""
        return self.window(0, self._next_index)

    def arrivals(self) -> tuple[IntArray, IntArray]:
        """(index of each held frame's last sample, monotonic ns when its last byte was read)."""
        with self._lock:
            starts, _rows, counts = self._held_frames()
            return starts + counts - 1, self._frames.rows()[:, 2].copy()

    def release_before(self, index: int) -> None:
        """Forget the samples below `index` (at most up to `next_index`) and the frames wholly
        below it: no later window starts lower. Indices and counters go on unchanged."""
        with self._lock:
            self._released = max(self._released, min(index, self._next_index))
            if self._values is None:
                return
            starts, _rows, counts = self._held_frames()
            gone = int(np.searchsorted(starts + counts - 1, self._released, side="left"))
            self._frames.forget_before(self._frames.first + gone)
            kept = self._frames.rows()
            self._values.forget_before(int(kept[0, 1]) if len(kept) else self._values.appended)

    def _held_frames(self) -> tuple[IntArray, IntArray, IntArray]:
        """Per held frame: its first sample index, its first row's number, its sample count."""
        table = self._frames.rows()
        rows = table[:, 1]
        end = self._values.appended if self._values is not None else 0
        return table[:, 0].copy(), rows.copy(), np.diff(np.append(rows, end))
