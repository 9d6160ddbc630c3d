"""A trial of several exchanges split on the meter's samples (controller.sweep.exchanges): the
marks placed as the phases are, each busy span and idle tail integrated as the window is."""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.energy import window_energy_mj
from analysis.trial_columns import EXCHANGE_ENERGY_FIELDS
from controller.sweep.exchanges import (
    ExchangeEnergy,
    exchange_energy,
    exchange_spans,
    exchange_tally,
)
from controller.sweep.phases import ClockMap

RATE_HZ = 1000.0
MS = 1_000_000  # ns
BASE_NS = 7_000_000_000  # the client's clock when the marker rose
# The client's clock onto the meter's: the marker's edges seen 1 s into the stream, no drift.
CLOCK = ClockMap((BASE_NS, BASE_NS + 10_000 * MS), (1.0, 11.0), "marker")


def _exchange(index: int, start_ms: float, end_ms: float | None, **more: Any) -> dict[str, Any]:
    return {
        "index": index,
        "start_mono_ns": BASE_NS + int(start_ms * MS),
        "response_end_mono_ns": None if end_ms is None else BASE_NS + int(end_ms * MS),
        "ok": end_ms is not None,
        "handshake": "kept",
        **more,
    }


def _trace(seconds: float, idle_mw: float, busy: list[tuple[float, float]], busy_mw: float) -> Any:
    """A meter trace from 0 s at RATE_HZ: idle_mw, busy_mw over each (start, end) of the
    meter's timebase."""
    t_s = np.arange(int(seconds * RATE_HZ) + 1) / RATE_HZ
    power = np.full_like(t_s, idle_mw)
    for start, end in busy:
        power[(t_s >= start) & (t_s <= end)] = busy_mw
    return t_s, power


def test_the_spans_are_placed_by_the_clock_and_held_to_the_window() -> None:
    exchanges = [
        _exchange(0, 0, 100),
        _exchange(1, 1000, None),  # failed: no busy span, no tail
        _exchange(2, 2000, 2300),
        _exchange(3, 3000, 99_000),  # its response's end mapped past the window's end
    ]
    busy, tails = exchange_spans(exchanges, CLOCK, 1.0, 5.0)
    assert np.allclose(busy, [(1.0, 1.1), (3.0, 3.3), (4.0, 5.0)])
    # A tail runs to the next exchange's start, the failed one's included: the node was idle
    # until that exchange began, whatever came of it.
    assert np.allclose(tails, [(1.1, 2.0), (3.3, 4.0), (5.0, 5.0)])


def test_known_trace_gives_known_tails_and_exchanges() -> None:
    idle, busy_mw = 100.0, 1100.0  # 1000 mW above idle while busy
    # Exchanges every second from 1 s on the meter, each busy 100 ms, then a 200 ms tail at
    # 600 mW (500 above idle) after the response.
    exchanges = [_exchange(i, 1000 * i, 1000 * i + 100) for i in range(4)]
    t_s, power = _trace(6.0, idle, [(1 + i, 1 + i + 0.1) for i in range(4)], busy_mw)
    for i in range(4):
        power[(t_s > 1 + i + 0.1) & (t_s <= 1 + i + 0.3)] = 600.0
    window = (1.0, 5.5)
    total, _ = window_energy_mj(t_s, power, *window)
    above = total - idle * (window[1] - window[0])
    energy = exchange_energy(
        exchanges, total, above, trace=(t_s, power, *window), clock=CLOCK, idle_mw=idle
    )
    assert energy is not None
    assert energy.count == 4
    assert energy.energy_per_report_mj == pytest.approx(total / 4)
    assert energy.energy_per_report_above_idle_mj == pytest.approx(above / 4)
    # Linear between samples: each busy span's edges share a millisecond with its neighbours.
    assert energy.exchange_energy_mean_mj == pytest.approx(100.0, abs=1.0)
    assert energy.idle_tail_mean_mj == pytest.approx(100.0, abs=1.0)
    assert energy.idle_tail_energy_mj == pytest.approx(4 * energy.idle_tail_mean_mj)


def test_without_a_clock_only_the_energy_per_report() -> None:
    # An engine whose record has no phases: its marks cannot be placed.
    energy = exchange_energy([_exchange(0, 0, 10), _exchange(1, 20, 30)], 50.0, 10.0)
    assert energy == ExchangeEnergy(2, 25.0, 5.0)


def test_every_exchange_failed_leaves_the_spans_empty() -> None:
    t_s, power = _trace(3.0, 100.0, [], 0.0)
    energy = exchange_energy(
        [_exchange(0, 0, None), _exchange(1, 500, None)],
        200.0,
        0.0,
        trace=(t_s, power, 1.0, 2.0),
        clock=CLOCK,
        idle_mw=100.0,
    )
    assert energy == ExchangeEnergy(2, 100.0, 0.0)


def test_no_exchanges_no_energy() -> None:
    assert exchange_energy([], 1.0, 1.0) is None


@given(
    st.lists(
        st.tuples(st.floats(0, 500), st.floats(0, 400), st.booleans()), min_size=1, max_size=12
    ),
    st.floats(0, 2000),
)
def test_busy_and_tails_tile_from_the_first_response_on(
    gaps: list[tuple[float, float, bool]], idle_mw: float
) -> None:
    """Over any schedule, the busy spans and tails of the exchanges that got a response never
    overlap, stay in the window, and (idle subtracted the same way) their energies add up to
    the window's from the first exchange's start where every exchange got one."""
    exchanges, at = [], 0.0
    for index, (gap, busy, ok) in enumerate(gaps):
        at += gap
        exchanges.append(_exchange(index, at, at + busy if ok else None))
        at += busy
    end_s = 1.0 + at / 1000 + 0.5
    t_s, power = _trace(end_s + 0.5, 300.0, [], 0.0)
    power = power + np.sin(t_s * 37.0) * 200.0
    busy_spans, tails = exchange_spans(exchanges, CLOCK, 1.0, end_s)
    spans = sorted(busy_spans + tails)
    for (_a, b), (c, _d) in itertools.pairwise(spans):
        assert c >= b - 1e-9
    assert all(1.0 <= a <= b <= end_s for a, b in spans)
    if not all(ok for _g, _b, ok in gaps):
        return
    first = CLOCK.meter_s_of(int(exchanges[0]["start_mono_ns"]))
    total, _ = window_energy_mj(t_s, power, first, end_s)
    energy = exchange_energy(
        exchanges, 0.0, 0.0, trace=(t_s, power, 1.0, end_s), clock=CLOCK, idle_mw=idle_mw
    )
    assert energy is not None
    assert energy.exchange_energy_mean_mj is not None and energy.idle_tail_energy_mj is not None
    summed = energy.exchange_energy_mean_mj * len(exchanges) + energy.idle_tail_energy_mj
    assert summed == pytest.approx(total - idle_mw * (end_s - first), abs=1e-6, rel=1e-9)


def test_a_long_trial_adds_one_span_of_samples_not_the_window() -> None:
    """20 minutes at 1 kHz, a report every second: integrating per exchange must not copy the
    window (19 MB of float64 here), only a span's samples at a time."""
    seconds, count = 1200.0, 1200
    exchanges = [_exchange(i, 1000 * i, 1000 * i + 50) for i in range(count)]
    t_s, power = _trace(seconds + 2.0, 100.0, [], 0.0)
    clock = ClockMap((BASE_NS, BASE_NS + int(seconds * 1e9)), (1.0, 1.0 + seconds), "marker")
    tracemalloc.start()
    try:
        energy = exchange_energy(
            exchanges,
            1.0,
            1.0,
            trace=(t_s, power, 1.0, 1.0 + seconds),
            clock=clock,
            idle_mw=100.0,
        )
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert energy is not None and energy.idle_tail_energy_mj == pytest.approx(0.0, abs=1e-6)
    assert peak < 2_000_000, f"{peak} bytes at peak against {t_s.nbytes * 2} in the window"


def test_the_record_fields_are_the_declared_columns() -> None:
    names = [name for name in ExchangeEnergy.__dataclass_fields__ if name != "count"]
    assert names == [column.name for column in EXCHANGE_ENERGY_FIELDS]


def test_tally_counts_ok_failed_and_handshakes_in_order() -> None:
    exchanges = [
        _exchange(0, 0, 1, handshake="full"),
        _exchange(1, 2, 3, handshake="0rtt"),
        _exchange(2, 4, None, handshake="resumed"),
        _exchange(3, 5, 6, handshake="0rtt"),
    ]
    assert exchange_tally(exchanges) == (
        ("ok", 3),
        ("failed", 1),
        ("full", 1),
        ("0rtt", 2),
        ("resumed", 1),
    )
