"""A trial's window split into connect, exchange and close (controller.sweep.phases): the
client's boundaries placed on the meter's timebase, each phase integrated as the window is."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.energy import window_energy_mj
from controller.sweep.phases import ClockMap, clock_map, first_byte_s, phase_bounds, phase_energy

RATE_HZ = 1000.0


def _record(raised: int, connect: int, exchange: int, close: int, lowered: int) -> dict[str, Any]:
    return {
        "t_mono_start_ns": raised + 1_000,  # the probe starts just after the marker rises
        "t_mono_end_ns": exchange,
        "phases": {
            "marker_raised_mono_ns": raised,
            "connect_done_mono_ns": connect,
            "exchange_done_mono_ns": exchange,
            "close_done_mono_ns": close,
            "marker_lowered_mono_ns": lowered,
        },
    }


def _trace(powers: list[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(len(powers)) / RATE_HZ, np.asarray(powers, dtype=np.float64)


def test_the_marker_maps_by_its_edges_and_the_clock_by_the_fetch_and_the_close() -> None:
    record = _record(10, 20, 30, 40, 50)
    marker = clock_map(record, "marker", 1.0, 2.0)
    assert marker == ClockMap((10, 50), (1.0, 2.0), "marker")
    clock = clock_map(record, "clock", 1.0, 2.0)
    assert clock == ClockMap((1_010, 40), (1.0, 2.0), "clock_offset")


def test_a_record_without_phases_has_none() -> None:
    # The nghttp2 engine's: its tools' boundaries cannot be seen from outside.
    assert clock_map({"t_mono_start_ns": 1, "t_mono_end_ns": 2}, "marker", 0.0, 1.0) is None


def test_the_phases_of_a_known_trace_are_its_pieces() -> None:
    t_s, power = _trace([100.0] * 3 + [1000.0] * 4 + [100.0] * 4)  # 0..10 ms
    # Client clock: the marker rose at 5 s, connect done 2 ms later, last byte at 6 ms, lowered
    # at 9 ms; on the meter the edges were seen at 1 ms and 9 ms.
    s = 5_000_000_000
    record = _record(s, s + 2_000_000, s + 6_000_000, s + 7_000_000, s + 8_000_000)
    clock = clock_map(record, "marker", 0.001, 0.009)
    assert clock is not None
    bounds = phase_bounds(record, clock, 0.001, 0.009)
    assert bounds == pytest.approx((0.001, 0.003, 0.007, 0.009))
    phases = phase_energy(t_s, power, bounds, clock.phase_clock, idle_mw=100.0)
    assert phases.durations_s == pytest.approx((0.002, 0.004, 0.002))
    expected = [window_energy_mj(t_s, power, a, b)[0] for a, b in itertools.pairwise(bounds)]
    assert phases.energies_mj == pytest.approx(tuple(expected))
    # 2->3 ms ramps 100->1000 mW: 0.55 mJ; with 1->2 ms at 100 mW, 0.65 mJ.
    assert phases.energies_mj[0] == pytest.approx(0.65)
    assert phases.above_idle_mj[0] == pytest.approx(0.65 - 0.2)


def test_boundaries_outside_the_window_or_out_of_order_are_held_to_it() -> None:
    record = _record(100, 50, 20, 500, 400)  # connect "before" the edge, exchange before that
    clock = ClockMap((100, 400), (1.0, 1.3), "marker")
    assert phase_bounds(record, clock, 1.0, 1.3) == (1.0, 1.0, 1.0, 1.3)
    late = _record(100, 900, 950, 990, 400)
    assert phase_bounds(late, clock, 1.0, 1.3) == (1.0, 1.3, 1.3, 1.3)


# A window: its first sample and its length in samples, in a 60-sample trace.
_window = st.tuples(st.integers(0, 10), st.integers(2, 49))


@given(
    powers=st.lists(st.floats(0, 5000), min_size=60, max_size=60),
    window=_window,
    offsets=st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
    shift=st.floats(0, 0.999),
)
def test_the_three_phases_always_sum_to_the_windows_energy(
    powers: list[float],
    window: tuple[int, int],
    offsets: tuple[float, float, float],
    shift: float,
) -> None:
    t_s, power = _trace(powers)
    first, length = window
    start_s, end_s = (first + shift) / RATE_HZ, (first + length) / RATE_HZ
    marks = sorted(offsets)
    span_ns = 10_000_000
    record = _record(0, int(marks[0] * span_ns), int(marks[1] * span_ns), 0, span_ns)
    clock = clock_map(record, "marker", start_s, end_s)
    assert clock is not None
    phases = phase_energy(t_s, power, phase_bounds(record, clock, start_s, end_s), "marker")
    whole, _samples = window_energy_mj(t_s, power, start_s, end_s)
    assert sum(phases.energies_mj) == pytest.approx(whole, rel=1e-9, abs=1e-9)
    assert sum(phases.durations_s) == pytest.approx(end_s - start_s, rel=1e-12, abs=1e-15)
    assert min(phases.durations_s) >= 0


@given(
    power_mw=st.floats(1, 5000),
    window=_window,
    marks=st.tuples(st.integers(0, 10**7), st.integers(0, 10**7)),
)
def test_a_constant_power_gives_energies_proportional_to_the_durations(
    power_mw: float, window: tuple[int, int], marks: tuple[int, int]
) -> None:
    t_s, power = _trace([power_mw] * 60)
    first, length = window
    start_s, end_s = first / RATE_HZ, (first + length) / RATE_HZ
    connect, exchange = sorted(marks)
    record = _record(0, connect, exchange, 0, 10**7)
    clock = clock_map(record, "marker", start_s, end_s)
    assert clock is not None
    phases = phase_energy(
        t_s, power, phase_bounds(record, clock, start_s, end_s), "marker", idle_mw=power_mw
    )
    for energy, duration, above in zip(
        phases.energies_mj, phases.durations_s, phases.above_idle_mj, strict=True
    ):
        assert energy == pytest.approx(power_mw * duration, rel=1e-9, abs=1e-9)
        assert above == pytest.approx(0.0, abs=1e-9 * power_mw)


@given(
    drift_ppm=st.floats(-500, 500),
    start_ns=st.integers(0, 10**15),
    meter_start_s=st.floats(0, 1e5),
    length_s=st.floats(1e-4, 100),
    fractions=st.tuples(st.floats(0, 1), st.floats(0, 1)),
)
def test_the_marker_map_removes_the_clocks_drift_within_the_trial(
    drift_ppm: float,
    start_ns: int,
    meter_start_s: float,
    length_s: float,
    fractions: tuple[float, float],
) -> None:
    # The node's clock runs fast or slow against the meter's: an instant t s into the trial on
    # the meter is stamped t x (1 + drift) s in on the node. Through the edges, each boundary
    # lands where it happened on the meter, however far from the start.
    scale = 1 + drift_ppm * 1e-6
    edges = (start_ns, start_ns + round(length_s * scale * 1e9))
    clock = ClockMap(edges, (meter_start_s, meter_start_s + length_s), "marker")
    for fraction in fractions:
        stamped = start_ns + round(fraction * length_s * scale * 1e9)
        assert clock.meter_s_of(stamped) == pytest.approx(
            meter_start_s + fraction * length_s, abs=2e-9 + 1e-12 * meter_start_s
        )


@given(
    powers=st.lists(st.floats(0, 5000), min_size=60, max_size=60),
    window=_window,
    marks=st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(-0.2, 1.2)),
)
def test_a_workloads_split_of_the_exchange_sums_to_it(
    powers: list[float], window: tuple[int, int], marks: tuple[float, float, float]
) -> None:
    t_s, power = _trace(powers)
    first, length = window
    start_s, end_s = first / RATE_HZ, (first + length) / RATE_HZ
    span_ns = 10_000_000
    connect, exchange = sorted(marks[:2])
    record = _record(0, int(connect * span_ns), int(exchange * span_ns), 0, span_ns)
    # The first byte may be stamped anywhere: it is held within the exchange.
    record["phases"]["first_byte_mono_ns"] = int(marks[2] * span_ns)
    clock = clock_map(record, "marker", start_s, end_s)
    assert clock is not None
    bounds = phase_bounds(record, clock, start_s, end_s)
    split_s = first_byte_s(record, clock, bounds)
    assert split_s is not None and bounds[1] <= split_s <= bounds[2]
    phases = phase_energy(t_s, power, bounds, "marker", split_s=split_s)
    assert phases.exchange_parts is not None
    (before_s, before_mj), (after_s, after_mj) = phases.exchange_parts
    assert before_mj + after_mj == pytest.approx(phases.energies_mj[1], rel=1e-9, abs=1e-9)
    assert before_s + after_s == pytest.approx(phases.durations_s[1], rel=1e-9, abs=1e-15)


def test_no_first_byte_no_split() -> None:
    record = _record(0, 10, 20, 30, 40)
    clock = ClockMap((0, 40), (0.0, 0.04), "marker")
    assert first_byte_s(record, clock, phase_bounds(record, clock, 0.0, 0.04)) is None
