"""The samples of one PPK2 run, averaged to the sweep's rate, with every loss and marker edge.

The PPK2 streams 100 kS/s; a sweep's windows need far less (the config's `meter.rate_hz`,
1000 by default), and keeping every sample (current, index, logic: 17 B each, 1.7 MB/s)
would fill a laptop's memory in an hour-long sweep. So samples are averaged into bins of
`SAMPLE_RATE_HZ // rate_hz` stream indices (bin b covers indices [b*k, (b+1)*k), aligned to
the stream, not to arrival), 24 B per bin (the sum, the samples and how many of them were
clipped at the top of the top range), while what must stay exact is kept at full rate:
marker edges (a change of the marker bit, at the stream index of the first sample after it),
counter gaps and resyncs (at the index of the first sample after them). A bin missing some of
its samples is the mean of those that arrived; one with none is left out. Nothing is repaired:
`window` reports the samples lost inside it. Times are `index / SAMPLE_RATE_HZ` seconds; a
bin's time is the centre of its indices.

A sweep of hours would still hold 24 B per bin for all of it: `release_before(index)` forgets
the bins, edges, gaps, resyncs and reads below an index no later read needs (the sweep's tap
calls it as each trial begins; `controller.meter.held`), with indices and counters going on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.meter.held import HeldLog, HeldRows
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ, Ppk2Block

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
_INITIAL_BINS = 4096


@dataclass(frozen=True, slots=True)
class Ppk2Edge:
    rising: bool
    stream_index: int  # the first sample at the new level
    t_mono_ns: int  # when the read holding it returned


@dataclass(frozen=True, slots=True)
class Ppk2Window:
    """Bins overlapping stream indices [first_index, end_index): times (s) and mean currents."""

    t_s: F64
    current_ua: F64
    samples_lost: int  # counted by counter gaps inside the span
    saturated: I64  # per bin kept: its samples at the top of the top range
    gaps: int
    resyncs: int


def first_pulse(edges: list[Ppk2Edge]) -> tuple[int, int] | None:
    """Stream indices of the first rising edge in `edges` and of the falling one after it;
    None until both have arrived."""
    rising = next((e for e in edges if e.rising), None)
    if rising is None:
        return None
    falling = next(
        (e for e in edges if not e.rising and e.stream_index > rising.stream_index), None
    )
    return None if falling is None else (rising.stream_index, falling.stream_index)


class Ppk2Store:
    def __init__(self, rate_hz: int, marker_bit: int = 0) -> None:
        if SAMPLE_RATE_HZ % rate_hz:
            raise ValueError(f"{rate_hz} Hz does not divide {SAMPLE_RATE_HZ}")
        self.bin_samples = SAMPLE_RATE_HZ // rate_hz
        self.rate_hz = rate_hz
        self._mask = 1 << marker_bit
        self._lock = threading.Lock()
        # Row b is bin b: the sum of its currents; its samples and how many were clipped.
        self._sum = HeldRows(1, np.float64, _INITIAL_BINS)
        self._count = HeldRows(2, np.int64, _INITIAL_BINS)
        self._next_index = 0
        self._released = 0
        self._level: int | None = None
        self._edges: HeldLog[Ppk2Edge] = HeldLog()
        self._gaps = HeldRows(2, np.int64)  # stream index after the gap, samples lost
        self._resyncs = HeldRows(1, np.int64)  # stream index after the resync
        self._arrivals = HeldRows(2, np.int64)  # a read's last stream index, when it returned
        self.received = 0
        self.lost = 0

    @property
    def next_index(self) -> int:
        """One past the highest stream index received."""
        return self._next_index

    @property
    def released_index(self) -> int:
        """Stream indices below this are forgotten (`release_before`); windows start no lower."""
        return self._released

    @property
    def held_bins(self) -> int:
        return self._sum.held

    @property
    def held_bytes(self) -> int:
        """The bytes of the arrays holding bins, gaps, resyncs and arrivals, unused room
        included (edges are a few per trial)."""
        tables = (self._sum, self._count, self._gaps, self._resyncs, self._arrivals)
        return sum(table.nbytes for table in tables)

    @property
    def edge_count(self) -> int:
        """Marker edges seen over the run (released ones too)."""
        with self._lock:
            return self._edges.count

    def add(self, block: Ppk2Block, t_mono_ns: int) -> None:
        if len(block) == 0:
            return
        with self._lock:
            index = block.index
            bins = index // self.bin_samples
            self._sum.extend_zeros(int(bins[-1]) + 1 - self._sum.appended)
            self._count.extend_zeros(int(bins[-1]) + 1 - self._count.appended)
            rows = bins - self._sum.first
            np.add.at(self._sum.rows()[:, 0], rows, block.current_ua)
            counts = self._count.rows()
            np.add.at(counts[:, 0], rows, 1)
            np.add.at(counts[:, 1], rows[block.saturated], 1)
            level = (block.logic & self._mask) != 0
            before = np.empty(level.size, dtype=np.bool_)
            before[0] = level[0] if self._level is None else bool(self._level)
            before[1:] = level[:-1]
            for at in np.flatnonzero(level != before).tolist():
                self._edges.append(Ppk2Edge(bool(level[at]), int(index[at]), t_mono_ns))
            self._level = int(level[-1])
            self._gaps.extend(np.column_stack([index[block.gap_at], block.gap_lost]))
            self._resyncs.extend(index[block.resync_at])
            self.received += len(block)
            self.lost += block.lost_samples
            self._next_index = int(index[-1]) + 1
            self._arrivals.extend([[int(index[-1]), t_mono_ns]])

    def edges(self, since: int = 0) -> list[Ppk2Edge]:
        """The held marker edges of the run from its `since`-th on (0: its first)."""
        with self._lock:
            return self._edges.since(since)

    def arrivals(self) -> tuple[I64, I64]:
        """(stream index of each held read's last sample, monotonic ns when it returned)."""
        with self._lock:
            table = self._arrivals.rows()
            return table[:, 0].copy(), table[:, 1].copy()

    def window(self, first_index: int, end_index: int) -> Ppk2Window:
        """The bins overlapping [first_index, end_index), the span starting no lower than
        `released_index`."""
        with self._lock:
            k = self.bin_samples
            first_index = max(first_index, self._released)
            end_index = max(end_index, first_index)
            lo = first_index // k - self._sum.first
            hi = min(-(-end_index // k), -(-self._next_index // k)) - self._sum.first
            hi = max(hi, lo)
            counts = self._count.rows()[lo:hi, 0]
            saturated = self._count.rows()[lo:hi, 1]
            sums = self._sum.rows()[lo:hi, 0]
            keep = counts > 0
            bins = np.arange(lo, lo + counts.size, dtype=np.float64)[keep] + self._sum.first
            gaps = self._gaps.rows()
            inside = (gaps[:, 0] >= first_index) & (gaps[:, 0] < end_index)
            resyncs = self._resyncs.rows()[:, 0]
            return Ppk2Window(
                t_s=(bins * k + (k - 1) / 2) / SAMPLE_RATE_HZ,
                current_ua=sums[keep] / counts[keep],
                samples_lost=int(gaps[inside, 1].sum()),
                saturated=saturated[keep],
                gaps=int(inside.sum()),
                resyncs=int(((resyncs >= first_index) & (resyncs < end_index)).sum()),
            )

    def release_before(self, index: int) -> None:
        """Forget stream indices below `index` (at most up to `next_index`): the bins wholly
        below it, and the edges, gaps, resyncs and reads there. No later window starts lower;
        indices and counters (`received`, `lost`, `edge_count`) go on unchanged."""
        with self._lock:
            self._released = max(self._released, min(index, self._next_index))
            released = self._released
            self._sum.forget_before(released // self.bin_samples)
            self._count.forget_before(released // self.bin_samples)
            self._edges.forget_below(released, key=lambda edge: edge.stream_index)
            for table in (self._gaps, self._resyncs, self._arrivals):
                below = int(np.searchsorted(table.rows()[:, 0], released, side="left"))
                table.forget_before(table.first + below)
