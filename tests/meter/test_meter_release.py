"""A run of many trials through the sweep's tap, opened as the sweep opens it (the virtual
meter's board frames on a pty, the emulated PPK2 on a pty): each `begin_trial` releases what
arrived more than the tap's horizon before, so what the store holds stays within it, while
every trial's window, cut by its marker edges, reads exactly what a store that never released
anything holds for the same span (a shadow fed every read the tap's store is)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config.model import MeterConfig
from controller.meter.node_power import WatchSpec
from controller.meter.ppk2.store import Ppk2Store
from controller.meter.samples import SampleStore
from controller.meter.session import MeterSession
from controller.sweep.meter_tap import StreamTap, TapRequest, open_tap, release_point
from controller.sweep.setup import _device

# Short enough that a run of a few seconds releases most of itself.
_HORIZON_S = 0.3
_TRIALS = 8  # at least; then until the run spans `_SPAN` horizons of arrivals
_SPAN = 10
_HANG_S = 60.0  # a guard against a hang, not a timing assertion


def _store(tap: StreamTap[Any]) -> SampleStore | Ppk2Store:
    store: SampleStore | Ppk2Store = tap._samples  # type: ignore[assignment]
    return store


def _shadowed(store: SampleStore | Ppk2Store) -> tuple[Any, list[tuple[int, int]]]:
    """A store that is fed every read `store` is and never releases, and the spans the tap
    reads of `store` (its window calls), in order."""
    shadow = SampleStore() if isinstance(store, SampleStore) else Ppk2Store(store.rate_hz)
    add, window = store.add, store.window
    reads: list[tuple[int, int]] = []

    def both(data: Any, t_mono_ns: int) -> None:
        shadow.add(data, t_mono_ns)  # first: what the tap's store has, the shadow has
        add(data, t_mono_ns)

    def recorded(first: int, end: int) -> Any:
        reads.append((first, end))
        return window(first, end)

    store.add, store.window = both, recorded  # type: ignore[method-assign]
    return shadow, reads


def _edge_count(tap: StreamTap[Any], store: SampleStore | Ppk2Store) -> Callable[[], int]:
    """How many marker edges the run has seen: the PPK2's store counts its own (in its sample
    words), the board's session its MARKER frames."""
    if isinstance(store, Ppk2Store):
        return lambda: store.edge_count
    session: MeterSession = tap.session  # type: ignore[assignment]
    return lambda: session.marker_count


def _same(a: object, b: object) -> bool:
    return all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
        for x, y in zip(astuple(a), astuple(b), strict=True)  # type: ignore[call-overload]
    )


def _pulse(fd: int, store: SampleStore | Ppk2Store, edges: Callable[[], int], samples: int) -> None:
    """A marker pulse at least `samples` of the meter's samples long (counted in the stream,
    not in wall time), returning once both its edges are in the stream: however late a loaded
    machine runs the meter's marker line, the trial's window is then cut by them."""
    seen = edges()
    deadline = time.monotonic() + _HANG_S
    os.write(fd, b"1\n")
    while edges() < seen + 1:
        assert time.monotonic() < deadline, "no rising edge"
        time.sleep(0.005)
    until = store.next_index + samples
    while store.next_index < until:
        time.sleep(0.005)
    os.write(fd, b"0\n")
    while edges() < seen + 2:
        assert time.monotonic() < deadline, "no falling edge"
        time.sleep(0.005)


@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(0, 3_000_000_000)), max_size=40),
    st.floats(0, 5),
)
def test_the_release_point_keeps_exactly_the_reads_within_the_horizon(
    reads: list[tuple[int, int]], horizon_s: float
) -> None:
    """Reads of 1-50 samples arriving 0-3 s apart: every read that arrived within the horizon
    of the latest ends at or after the point, every older one before it."""
    last = np.cumsum([n for n, _gap in reads], dtype=np.int64) - 1
    arrival_ns = np.cumsum([gap for _n, gap in reads], dtype=np.int64)
    point = release_point(last, arrival_ns, horizon_s)
    if not reads:
        assert point == 0
        return
    recent = arrival_ns >= arrival_ns[-1] - int(horizon_s * 1e9)
    assert (last[recent] >= point).all() and (last[~recent] < point).all()
    assert point == (int(last[~recent][-1]) + 1 if (~recent).any() else 0)


@pytest.mark.parametrize("source", ["virtual", "ppk2"])
def test_a_long_run_holds_its_horizon_and_reads_every_trial_as_if_nothing_was_released(
    tmp_path: Path, source: str
) -> None:
    fifo = tmp_path / "marker.fifo"
    meter = MeterConfig(source=source)
    watch = (WatchSpec("pid", str(os.getpid())),)
    with _device(meter, watch, tmp_path, fifo) as (port, facts, error):
        tap = open_tap(TapRequest(meter, port, facts, error, fifo))
        marker = -1
        try:
            assert isinstance(tap, StreamTap)
            tap.release_horizon_s = _HORIZON_S
            store = _store(tap)
            shadow, reads = _shadowed(store)
            marker = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            edges = _edge_count(tap, store)
            pulse = int(0.05 * tap.rate_hz)  # 50 ms of stream
            trials = 0
            while True:
                _last, arrived_ns = shadow.arrivals()
                span_s = (arrived_ns[-1] - arrived_ns[0]) / 1e9 if arrived_ns.size else 0.0
                if trials >= _TRIALS and span_s >= _SPAN * _HORIZON_S:
                    break
                before_ns = store.arrivals()[1]
                latest_ns = int(before_ns[-1]) if before_ns.size else 0
                tap.begin_trial()
                # Every read held arrived within the horizon of the latest before the release.
                held_ns = store.arrivals()[1]
                assert held_ns.size == 0 or held_ns[0] >= latest_ns - _HORIZON_S * 1e9
                start_ns = time.time_ns()
                _pulse(marker, store, edges, pulse)
                end_ns = time.time_ns()
                reads.clear()
                window = tap.window(start_ns, end_ns)
                assert window.source == "marker", window.clock_reason
                (first, end) = reads[-1]  # the trial's trace
                assert first >= store.released_index
                assert _same(store.window(first, end), shadow.window(first, end))
                trials += 1
        finally:
            if marker >= 0:
                os.close(marker)
            tap.close()
    assert error is None or error() is None
    # Read once the reader has stopped. The shadow has every read since it was attached (a
    # read or two before that went to the tap's store alone): counters count them all.
    assert store.received >= shadow.received > 0
    held = store.held_samples if isinstance(store, SampleStore) else store.held_bins
    whole = shadow.held_samples if isinstance(shadow, SampleStore) else shadow.held_bins
    assert held < whole  # the run's older part is gone
