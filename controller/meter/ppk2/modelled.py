"""The emulated PPK2 driven by the node power model: what the virtual meter's PPK2 device is.

`ModelledPpk2Source` is a `Ppk2Emulator` source: at each call (the emulator's thread, every
tick) it refreshes `NodePower` for the watched node (its first source), turns mW into uA at
the supply voltage, and sets the marker bit from the edges the marker FIFO delivered by then,
so the node's marker line sets D0 (or the configured input) as a wired GPIO would: from the
first sample at or after the instant the node stamped on the edge. An edge read after the
samples of its instant were sent (the emulator's thread ran late) applies from the first
sample not yet sent; one stamped after the call's last sample waits for the next call.

Ground truth (`options.truth_path`, the format of `node_power`): the session averages the
100 kS/s stream into bins of `SAMPLE_RATE_HZ // rate_hz` stream indices (`store`), so the truth
is written per bin, at `rate_hz`: row `b` is the exact mean of the modelled power over the
bin's samples, what a perfect PPK2 would report for it. A measured bin then differs from its
truth by the PPK2's quantisation only (and, when samples are lost, by which ones arrived).
"""

from __future__ import annotations

import math
import time

import numpy as np
from numpy.typing import ArrayLike, NDArray

from controller.errors import MeterError
from controller.meter.node_power import (
    MarkerEdge,
    MarkerFifo,
    ModelledMeterOptions,
    NodePower,
    TruthWriter,
)
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ
from controller.meter.ppk2.emulator import Ppk2Emulator

# Truth rows are written out every this many bins (one write per 50 ms at 1 kHz).
_TRUTH_FLUSH_BINS = 50


class ModelledPpk2Source:
    def __init__(
        self,
        options: ModelledMeterOptions,
        supply_mv: int,
        marker_bit: int = 0,
        *,
        rate_hz: int = 1000,
    ) -> None:
        self._power = NodePower(
            options.watch, options.model, time.monotonic(), no_load=options.no_load
        )
        self._marker = MarkerFifo(options.marker_fifo)
        self._truth = TruthWriter(options.truth_path)
        self._supply_v = supply_mv / 1000
        self._bit = 1 << marker_bit
        self._level = 0
        self._edges: list[MarkerEdge] = []  # read, not yet reached by the samples
        # The monotonic instant of stream index 0 of the current start, bounded from above by
        # each call (the emulator takes the samples due by its clock: the last is no later).
        self._origin_s = math.inf
        self._bin_samples = SAMPLE_RATE_HZ // rate_hz
        self._bin = 0  # the bin being summed, its power sum (mW x samples) and samples so far
        self._bin_sum_mw = 0.0
        self._bin_count = 0
        self._unflushed = 0

    def __call__(self, t_s: NDArray[np.float64]) -> tuple[ArrayLike, ArrayLike]:
        now_s = time.monotonic()
        self._power.refresh(now_s)
        self._edges += self._marker.edges(now_s)
        power_mw = float(self._power.power_mw((0,))[0])
        if t_s.size:
            self._record(round(float(t_s[0]) * SAMPLE_RATE_HZ), t_s.size, power_mw)
        current_ua = power_mw / self._supply_v * 1000  # mW / V = mA
        return np.full(t_s.size, current_ua), self._logic(t_s, now_s)

    def _logic(self, t_s: NDArray[np.float64], now_s: float) -> ArrayLike:
        """The marker bit of each sample, from the edges' own instants."""
        if not t_s.size:
            return 0
        if t_s[0] == 0:  # a start command: the stream's clock begins again
            self._origin_s = math.inf
        self._origin_s = min(self._origin_s, now_s - float(t_s[-1]))
        at_s = self._origin_s + t_s
        levels = np.full(t_s.size, self._level, dtype=np.uint8)
        while self._edges and self._edges[0].at_s <= at_s[-1]:
            edge = self._edges.pop(0)
            levels[int(np.searchsorted(at_s, edge.at_s)) :] = edge.level
            self._level = edge.level
        return np.where(levels == 1, self._bit, 0).astype(np.uint8)

    def close(self) -> None:
        self._marker.close()
        self._truth.close()

    def _record(self, first: int, count: int, power_mw: float) -> None:
        """Samples first..first+count-1 (stream indices since the start) at `power_mw`, summed
        into their bins; each bin's mean written as its truth row once the bin is whole."""
        if first == 0:  # a start command: indices (and the truth's rows) begin again
            self._truth.new_start()
            self._bin, self._bin_sum_mw, self._bin_count = 0, 0.0, 0
        k = self._bin_samples
        index, end = first, first + count
        while index < end:
            b = index // k
            if b != self._bin:  # samples the emulator let pass unsent leave their bins out
                self._bin, self._bin_sum_mw, self._bin_count = b, 0.0, 0
            taken = min(end, (b + 1) * k) - index
            self._bin_sum_mw += power_mw * taken
            self._bin_count += taken
            index += taken
            if self._bin_count == k:
                self._truth.segment(b, b + 1, (0,), np.array([self._bin_sum_mw / k]))
                self._bin, self._bin_sum_mw, self._bin_count = b + 1, 0.0, 0
                self._unflushed += 1
        if self._unflushed >= _TRUTH_FLUSH_BINS:
            self._truth.flush()
            self._unflushed = 0


class ModelledPpk2:
    """The emulated PPK2 on a pty, driven by a `ModelledPpk2Source` (which it closes): shaped
    like `VirtualMeter` (`start`, `port`, `error`, `stop`, `close`) so the sweep can start
    either."""

    def __init__(self, source: ModelledPpk2Source) -> None:
        self._source = source
        self._emulator = Ppk2Emulator(self._source)
        self.port = ""

    def start(self) -> None:
        self._emulator.start()
        self.port = self._emulator.port

    @property
    def error(self) -> MeterError | None:
        failure = self._emulator.failure
        if failure is None:
            return None
        error = MeterError(f"emulated PPK2 on {self.port} failed: {failure}")
        error.__cause__ = failure
        return error

    def stop(self) -> None:
        self._emulator.close()

    def close(self) -> None:
        self._emulator.close()
        self._source.close()
