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
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ, Ppk2Block

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


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
        self._sum: F64 = np.zeros(4096)
        self._count: I64 = np.zeros(4096, dtype=np.int64)
        self._saturated: I64 = np.zeros(4096, dtype=np.int64)
        self._next_index = 0
        self._level: int | None = None
        self._edges: list[Ppk2Edge] = []
        self._gap_index: list[int] = []
        self._gap_lost: list[int] = []
        self._resync_index: list[int] = []
        self._arrival_index: list[int] = []
        self._arrival_ns: list[int] = []
        self.received = 0
        self.lost = 0

    @property
    def next_index(self) -> int:
        """One past the highest stream index received."""
        return self._next_index

    def add(self, block: Ppk2Block, t_mono_ns: int) -> None:
        if len(block) == 0:
            return
        with self._lock:
            index = block.index
            bins = index // self.bin_samples
            self._grow(int(bins[-1]) + 1)
            np.add.at(self._sum, bins, block.current_ua)
            np.add.at(self._count, bins, 1)
            np.add.at(self._saturated, bins[block.saturated], 1)
            level = (block.logic & self._mask) != 0
            before = np.empty(level.size, dtype=np.bool_)
            before[0] = level[0] if self._level is None else bool(self._level)
            before[1:] = level[:-1]
            for at in np.flatnonzero(level != before).tolist():
                self._edges.append(Ppk2Edge(bool(level[at]), int(index[at]), t_mono_ns))
            self._level = int(level[-1])
            self._gap_index += index[block.gap_at].tolist()
            self._gap_lost += block.gap_lost.tolist()
            self._resync_index += index[block.resync_at].tolist()
            self.received += len(block)
            self.lost += block.lost_samples
            self._next_index = int(index[-1]) + 1
            self._arrival_index.append(int(index[-1]))
            self._arrival_ns.append(t_mono_ns)

    def edges(self) -> list[Ppk2Edge]:
        with self._lock:
            return list(self._edges)

    def arrivals(self) -> tuple[I64, I64]:
        """(stream index of each read's last sample, monotonic ns when that read returned)."""
        with self._lock:
            return np.array(self._arrival_index, dtype=np.int64), np.array(
                self._arrival_ns, dtype=np.int64
            )

    def window(self, first_index: int, end_index: int) -> Ppk2Window:
        with self._lock:
            k = self.bin_samples
            lo = max(0, first_index // k)
            hi = min(-(-end_index // k), -(-self._next_index // k))
            counts = self._count[lo:hi] if hi > lo else np.zeros(0, dtype=np.int64)
            saturated = self._saturated[lo:hi] if hi > lo else np.zeros(0, dtype=np.int64)
            sums = self._sum[lo:hi] if hi > lo else np.zeros(0)
            keep = counts > 0
            bins = np.arange(lo, lo + counts.size, dtype=np.float64)[keep]
            gaps = np.array(self._gap_index, dtype=np.int64)
            inside = (gaps >= first_index) & (gaps < end_index)
            resyncs = np.array(self._resync_index, dtype=np.int64)
            return Ppk2Window(
                t_s=(bins * k + (k - 1) / 2) / SAMPLE_RATE_HZ,
                current_ua=sums[keep] / counts[keep],
                samples_lost=int(np.array(self._gap_lost, dtype=np.int64)[inside].sum()),
                saturated=saturated[keep],
                gaps=int(inside.sum()),
                resyncs=int(((resyncs >= first_index) & (resyncs < end_index)).sum()),
            )

    def _grow(self, bins: int) -> None:
        if bins > self._sum.size:
            size = max(2 * self._sum.size, bins)
            self._sum = np.concatenate([self._sum, np.zeros(size - self._sum.size)])
            grown = np.zeros(size - self._count.size, dtype=np.int64)
            self._count = np.concatenate([self._count, grown])
            self._saturated = np.concatenate([self._saturated, grown])
