"""Marker edges carry the instant the node changed the line: each modelled meter (virtual,
simavr, emulated PPK2) places an edge there, however late its thread read the FIFO.

Every edge here is written late on purpose (stamped in the past, read at once): a busy
machine's late reader, made certain instead of waited for."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from agent.marker import FifoMarker
from controller.meter.commands import Start, Stop
from controller.meter.node_power import MarkerEdge, MarkerFifo, ModelledMeterOptions
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ
from controller.meter.ppk2.modelled import ModelledPpk2Source
from controller.meter.protocol import Marker, Status
from controller.meter.session import MeterSession
from controller.meter.simulate import with_edges
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from tests.meter._markers import wait_until_taken
from tests.meter.test_device import Host


def test_the_agents_fifo_lines_carry_their_instant_and_the_reader_keeps_it(
    tmp_path: Path,
) -> None:
    fifo = MarkerFifo(tmp_path / "marker")
    # No wait for the reader (tests/agent/test_fifo_marker.py has it): the lines are read late.
    marker = FifoMarker(str(tmp_path / "marker"), read_wait_s=0.0)
    try:
        rose_ns = marker.raise_line()
        fell_ns = marker.lower_line()
        rising, falling = fifo.edges(time.monotonic() + 5.0)  # read five seconds late
    finally:
        marker.close()
        fifo.close()
    assert (rising, falling) == (MarkerEdge(1, rose_ns / 1e9), MarkerEdge(0, fell_ns / 1e9))


def test_bare_lines_are_edges_when_read_and_other_lines_are_ignored(tmp_path: Path) -> None:
    fifo = MarkerFifo(tmp_path / "marker")
    fd = os.open(tmp_path / "marker", os.O_WRONLY)
    try:
        os.write(fd, b"1\nx\n0 12x\n2 5\n1 2 3\n0 500000000\n1 99000000000\n0")
        edges = fifo.edges(10.0)
        assert fifo.edges(11.0) == []  # the last line is not complete yet
        os.write(fd, b"\n")
        last = fifo.edges(12.0)
    finally:
        os.close(fd)
        fifo.close()
    # A stamp after the read (another clock's) is the read's instant, never the future.
    assert edges == [MarkerEdge(1, 10.0), MarkerEdge(0, 0.5), MarkerEdge(1, 10.0)]
    assert last == [MarkerEdge(0, 12.0)]


def test_the_virtual_meter_stamps_late_read_edges_with_their_own_instants(
    tmp_path: Path,
) -> None:
    """Both edges reach the meter in one read, 0.4 s after the rising one: stamped when read,
    they would share a sample; stamped by their instants, they are 250 samples apart."""
    meter = VirtualMeter(VirtualMeterOptions(marker_fifo=tmp_path / "marker", seed=3))
    meter.start()
    try:
        with MeterSession.open(meter.port, ack_timeout_s=10) as session:
            session.identify()
            session.start()
            wait_until_taken(session, 1000)  # the stamps fall well inside the run
            now_ns = time.monotonic_ns()
            rising_ns, falling_ns = now_ns - 400_000_000, now_ns - 150_000_000
            fd = os.open(tmp_path / "marker", os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, f"1 {rising_ns}\n0 {falling_ns}\n".encode())
            finally:
                os.close(fd)
            deadline = time.monotonic() + 60  # a guard against a hang, not a timing
            while len(session.markers()) < 2:
                assert time.monotonic() < deadline, "no MARKER frames"
                time.sleep(0.01)
            session.stop()
            rising, falling = session.markers()
    finally:
        meter.close()
    assert (rising.marker.edge, falling.marker.edge) == (1, 0)
    assert falling.sample_index - rising.sample_index in (249, 250, 251)  # 0.25 s at 1 kHz


def test_a_device_marker_told_late_carries_the_index_of_its_instant() -> None:
    """Edges at 0.1234 and 0.3 s told together only when the samples up to 0.1 s were sent,
    as a virtual meter's thread that ran late tells them, then the samples due by 0.5 s."""
    host = Host()
    host.send(Start(), now=0.0)
    host.run(0.1)
    assert host.device.marker(1, 0.1234) == 124
    assert host.device.marker(0, 0.3) == 300
    host.device.advance(0.5)
    frames = host.frames() + host.send(Stop(), now=0.5)
    markers = [f for f in frames if isinstance(f, Marker)]
    assert [(m.sample_index, m.edge) for m in markers] == [(124, 1), (300, 0)]
    # No sample lost to them: the modelled link carried each at its instant.
    (status,) = [f for f in frames if isinstance(f, Status)]
    assert status.samples_dropped == 0


def _line_time(line: str) -> int:
    return int(line.split(" ", 1)[0])


@given(
    steps=st.lists(st.integers(0, 1000), min_size=0, max_size=8),
    stamps=st.lists(st.integers(-5000, 15000), min_size=1, max_size=4),
)
def test_simavr_edges_go_at_their_instants_among_the_ticks_lines(
    steps: list[int], stamps: list[int]
) -> None:
    """Lines stay in time order (the harness refuses a time going back); an edge goes at its
    own instant, or at the tick's first time when it came before what the harness was given."""
    launch_ns, start_ns = 1_000_000, 2000
    times = list(np.cumsum([start_ns, *steps]))
    end_ns = times[-1] + 1000
    lines = [f"{t} 1200\n" for t in times]
    edges = [MarkerEdge(n % 2, (launch_ns + t) / 1e9) for n, t in enumerate(sorted(stamps))]
    out = with_edges(lines, edges, launch_ns, start_ns, end_ns)
    placed = [line for line in out if " m " in line]
    assert [_line_time(line) for line in out] == sorted(_line_time(line) for line in out)
    assert [line for line in out if " m " not in line] == lines
    assert [_line_time(line) for line in placed] == [
        min(max(t, start_ns), end_ns) for t in sorted(stamps)
    ]
    assert [line.split()[-1] for line in placed] == [str(e.level) for e in edges]


def test_the_emulated_ppk2_sets_the_marker_bit_from_each_edges_instant(tmp_path: Path) -> None:
    """Calls as the emulator makes them (the samples due by its clock); edges read late set the
    bit from their own instants within a call, edges after a call's samples wait for the next."""
    fifo = tmp_path / "marker"
    source = ModelledPpk2Source(ModelledMeterOptions(marker_fifo=fifo), supply_mv=5000)
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        block = np.arange(0, 1_000_000, dtype=np.float64) / SAMPLE_RATE_HZ  # 10 s of samples
        origin_ns = time.monotonic_ns() - 10_000_000_000  # the first sample, 10 s ago
        rising_ns, falling_ns = origin_ns + 5_000_000_000, origin_ns + 7_000_000_000
        os.write(fd, f"1 {rising_ns}\n0 {falling_ns}\n".encode())
        _current, logic = source(block)
        later = block[-1] + (1 + np.arange(1000, dtype=np.float64)) / SAMPLE_RATE_HZ
        _current, logic_later = source(later)
    finally:
        os.close(fd)
        source.close()
    bits = np.asarray(logic)
    rise = int(np.argmax(bits == 1))
    fall = rise + int(np.argmax(bits[rise:] == 0))
    # The source knows the stream's origin only as bounded by its call (the test's own clock
    # read comes before it): the rising edge is no later than its instant, and the pulse exact.
    assert 0 < rise <= 500_000 and fall - rise in (199_999, 200_000, 200_001)
    assert not np.asarray(logic_later).any()
    assert bits[:rise].sum() == 0 and bits[fall:].sum() == 0
