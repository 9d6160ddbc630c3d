"""What a sweep's meter store holds over a long run, with and without the release each trial's
`begin_trial` makes (measured in bytes of arrays, not a test): run
`python benchmarks/meter_memory.py`.

A run of `--hours` is fed, as its reader would, into two stores of each kind: the board's
`SampleStore` (frames as firmware 1.0.0 sends them, about 10 ms of samples each, arriving 2 ms
after their last sample) and the PPK2's `Ppk2Store` (100 kS/s in reads of `--ppk2-read-ms`,
averaged to `--rate-hz` bins). One store is never released (the store before release existed);
the other is released, at each trial's start, as `StreamTap.begin_trial` does
(`release_point` over the store's arrivals, `RELEASE_HORIZON_S`), trials of `--trial-s`
seconds with a second between. Reported: the bytes of the stores' arrays (their capacity,
unused room included: what the process holds) at the run's end and at most over it, and the
samples (bins) held.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from controller.meter.device import samples_per_frame
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ, Ppk2Block
from controller.meter.ppk2.store import Ppk2Store
from controller.meter.protocol import Samples
from controller.meter.samples import SampleStore
from controller.sweep.meter_tap import RELEASE_HORIZON_S, release_point

_ARRIVAL_DELAY_NS = 2_000_000
_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Held:
    end_bytes: int
    peak_bytes: int
    end_rows: int  # samples (board) or bins (PPK2) held at the end


def _trial_starts_s(hours: float, trial_s: float) -> list[float]:
    return [float(t) for t in np.arange(0.0, hours * 3600, trial_s + 1.0)]


def _release(store: SampleStore | Ppk2Store) -> None:
    index = release_point(*store.arrivals(), RELEASE_HORIZON_S)
    if index:
        store.release_before(index)


def _run(
    store: SampleStore | Ppk2Store,
    reads: Iterator[tuple[Any, int]],
    trial_s: float,
    hours: float,
    *,
    release: bool,
) -> int:
    """Feed `reads` (what the reader adds, when it arrived) into `store`, released as each
    trial begins when `release`; the most bytes it held."""
    starts = iter(_trial_starts_s(hours, trial_s))
    next_trial = next(starts, None)
    peak = 0
    for data, arrival_ns in reads:
        if release and next_trial is not None and arrival_ns >= next_trial * 1e9:
            _release(store)
            next_trial = next(starts, None)
        store.add(data, arrival_ns)
        peak = max(peak, store.held_bytes)
    return peak


def _board_reads(hours: float, rate_hz: int, channels: int) -> Iterator[tuple[Samples, int]]:
    per_frame = samples_per_frame(rate_hz, channels, 128)
    values = np.full((per_frame, channels), 512, dtype=np.uint16)
    for first in range(0, int(hours * 3600 * rate_hz), per_frame):
        arrival_ns = (first + per_frame) * 1_000_000_000 // rate_hz + _ARRIVAL_DELAY_NS
        yield Samples(0, first % (1 << 32), values), arrival_ns


def _ppk2_reads(hours: float, read_ms: float) -> Iterator[tuple[Ppk2Block, int]]:
    n = int(SAMPLE_RATE_HZ * read_ms / 1000)
    current = np.full(n, 1000.0)
    zeros = np.zeros(n, dtype=np.uint8)
    for first in range(0, int(hours * 3600 * SAMPLE_RATE_HZ), n):
        arrival_ns = (first + n) * 1_000_000_000 // SAMPLE_RATE_HZ + _ARRIVAL_DELAY_NS
        index = np.arange(first, first + n, dtype=np.int64)
        block = Ppk2Block(
            current, zeros, zeros, zeros, zeros.astype(bool), index,
            _EMPTY, _EMPTY, _EMPTY, _EMPTY, 0,
        )  # fmt: skip
        yield block, arrival_ns


def board(hours: float, rate_hz: int, channels: int, trial_s: float, release: bool) -> Held:
    store = SampleStore()
    reads = _board_reads(hours, rate_hz, channels)
    peak = _run(store, reads, trial_s, hours, release=release)
    return Held(store.held_bytes, peak, store.held_samples)


def ppk2(hours: float, rate_hz: int, read_ms: float, trial_s: float, release: bool) -> Held:
    store = Ppk2Store(rate_hz)
    peak = _run(store, _ppk2_reads(hours, read_ms), trial_s, hours, release=release)
    return Held(store.held_bytes, peak, store.held_bins)


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--rate-hz", type=int, default=1000)
    parser.add_argument("--channels", type=int, default=1, help="board channels (default 1)")
    parser.add_argument("--trial-s", type=float, nargs="+", default=[20.0, 1200.0])
    parser.add_argument("--ppk2-read-ms", type=float, default=10.0)
    parser.add_argument("--no-ppk2", action="store_true", help="the board's store only")
    args = parser.parse_args()
    print(
        f"{args.hours:g} h at {args.rate_hz} Hz; release horizon {RELEASE_HORIZON_S:g} s\n"
        "| store | trials | kept: end (peak) | released: end (peak) "
        "| held at end: kept / released |\n"
        "| --- | --- | --- | --- | --- |"
    )
    kinds = [("board", "samples")] + ([] if args.no_ppk2 else [("PPK2", "bins")])
    for kind, rows in kinds:
        for trial_s in args.trial_s:
            if kind == "board":
                kept, released = (
                    board(args.hours, args.rate_hz, args.channels, trial_s, release)
                    for release in (False, True)
                )
            else:
                kept, released = (
                    ppk2(args.hours, args.rate_hz, args.ppk2_read_ms, trial_s, release)
                    for release in (False, True)
                )
            print(
                f"| {kind} | {trial_s:g} s | {_mb(kept.end_bytes)} ({_mb(kept.peak_bytes)}) "
                f"| {_mb(released.end_bytes)} ({_mb(released.peak_bytes)}) "
                f"| {kept.end_rows} / {released.end_rows} {rows} |"
            )


if __name__ == "__main__":
    main()
