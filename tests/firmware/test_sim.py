"""Firmware in the loop: the real Mega 2560 firmware in simavr, fed a known waveform.

Every injected value must come back within 1 LSB at every sample with no loss for >= 10
simulated seconds, at 1 kHz and at the highest supported rate, and marker edges must carry the
index of the first sample taken after them. The harness runs in lockstep (--fast), so the
outcome does not depend on how loaded the machine is.
"""

from __future__ import annotations

import itertools
import os
import select
import struct
import subprocess
import threading
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require_tool
from tests.firmware import _wire
from tests.firmware._sim import FIRMWARE, MS, Simulator

SECONDS = 10


@pytest.fixture(scope="module")
def built() -> None:
    require_tool("make", "gcc", "avr-gcc", "simavr")
    if not Path("/usr/include/simavr/sim_avr.h").exists():
        message = "needs libsimavr-dev (listed in .ci/apt/firmware.txt)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    result = subprocess.run(
        ["make", "-s", "-C", str(FIRMWARE), "sim"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@dataclass(frozen=True)
class Run:
    indices: np.ndarray  # sample index of each delivered sample, ascending
    values: np.ndarray  # [delivered sample, channel]
    dropped: int
    taken: int
    markers: list[tuple[int, int, int]]
    seq_gaps: int
    rejected: int
    first_checked: int
    expected: np.ndarray  # [k, channel] expected ADC codes for samples first_checked + k
    marker_expect: list[tuple[int, int]]  # (sample_index, edge)


def run_waveform(rate_hz: int, mask: int, seconds: int, seed: int, oversampling: int = 1) -> Run:
    inputs_used = [pin for pin in range(8) if mask >> pin & 1]
    channels = len(inputs_used)
    rng = np.random.default_rng(seed)
    with Simulator() as sim:
        sim.advance(20 * MS)  # boot
        assert sim.command(_wire.SET_RATE, struct.pack("<I", rate_hz)) == 0
        assert sim.command(_wire.SET_CHANNELS, bytes([mask])) == 0
        assert sim.command(_wire.SET_OVERSAMPLING, bytes([oversampling])) == 0
        sim.write_lines([f"{sim.now_ns} m 1\n"])  # a defined level before sampling starts
        assert sim.command(_wire.START) == 0
        t0, period = sim.clock()
        assert period * rate_hz == 1_000_000_000

        # One input change per sample period, in the middle of the period: event j is applied
        # at the tick of sample first + j, so that sample and all its channels read it.
        first = (sim.now_ns - t0) // period + 2
        n = seconds * rate_hz
        mv = rng.integers(0, 5001, size=(n, channels))
        toggles = sorted(rng.choice(np.arange(10, n - 10), size=20, replace=False).tolist())
        marker_expect = []
        level = 1
        lines = []
        toggle_set = set(toggles)
        for j in range(n):
            t = t0 + (first + j - 1) * period + period // 2
            inputs = [0] * (inputs_used[-1] + 1)  # the line sets A0.. positionally
            for c, pin in enumerate(inputs_used):
                inputs[pin] = int(mv[j, c])
            lines.append(f"{t} " + " ".join(map(str, inputs)) + "\n")
            if j in toggle_set:
                level ^= 1
                lines.append(f"{t} m {level}\n")
                marker_expect.append((first + j, level))
        # enough to fill the last frame and to drain a full transmit ring (~40 ms of link)
        end_ns = t0 + (first + n) * period + 150 * MS
        lines.append(f"{end_ns}\n")
        writer = threading.Thread(target=sim.write_lines, args=(lines,))
        writer.start()
        last_index = first + n - 1

        def delivered_through_last() -> bool:
            # the last sample's frame, or one after it (when the link dropped that one)
            for f in reversed(sim.snapshot()):
                if f.frame_type == _wire.SAMPLES:
                    index, values = _wire.samples(f)
                    return index + len(values) > last_index
            return False

        sim.wait_until(delivered_through_last, timeout_s=150)
        writer.join()
        sim.now_ns = end_ns
        assert sim.command(_wire.STOP) == 0
        sim.advance_until(
            lambda: any(
                f.frame_type == _wire.STATUS and _wire.status(f).running == 0
                for f in sim.snapshot()[-5:]
            )
        )
        frames = sim.snapshot()
        rejected = sim._reader.rejected
        sim.close()

    chunks: list[np.ndarray] = []
    index_chunks: list[np.ndarray] = []
    seq_gaps = 0
    markers = []
    final = None
    for prev, f in itertools.pairwise(frames):
        seq_gaps += (prev.seq + 1) % 65536 != f.seq
    for f in frames:
        if f.frame_type == _wire.SAMPLES:
            index, values = _wire.samples(f)
            chunks.append(values)
            index_chunks.append(np.arange(index, index + len(values)))
        elif f.frame_type == _wire.MARKER:
            markers.append(_wire.marker(f))
        elif f.frame_type == _wire.STATUS:
            final = _wire.status(f)
    assert final is not None and final.running == 0
    indices = np.concatenate(index_chunks)
    assert (np.diff(indices) > 0).all(), "sample indices must only increase"
    expected = (mv * 1023) // 5000  # simavr's conversion: floor(mV * 1023 / Vref)
    return Run(
        indices=indices,
        values=np.concatenate(chunks),
        dropped=final.samples_dropped,
        taken=final.samples_taken,
        markers=markers,
        seq_gaps=seq_gaps,
        rejected=rejected,
        first_checked=first,
        expected=expected,
        marker_expect=marker_expect,
    )


def check_values_and_markers(run: Run) -> None:
    """Every delivered sample in the driven span reads its injected value within 1 LSB, and
    every marker edge carries the index of the first sample that saw the new input."""
    assert run.seq_gaps == 0  # the pty link itself loses nothing
    assert run.rejected == 0
    assert len(run.indices) + run.dropped == run.taken  # every sample accounted for
    span = (run.indices >= run.first_checked) & (
        run.indices < run.first_checked + len(run.expected)
    )
    got = run.values[span].astype(int)
    want = run.expected[run.indices[span] - run.first_checked]
    assert len(got) > 0
    worst = np.abs(got - want).max()
    assert worst <= 1, f"worst error {worst} LSB"
    assert [(i, e) for i, _, e in run.markers] == run.marker_expect
    assert all(pin == 2 for _, pin, _ in run.markers)


def check_lossless(run: Run) -> None:
    assert run.dropped == 0
    assert (run.indices == np.arange(run.taken)).all()
    check_values_and_markers(run)


@pytest.mark.slow
def test_waveform_at_1khz_comes_back_exactly(built: None) -> None:
    check_lossless(run_waveform(1000, 0x03, SECONDS, seed=1))


@pytest.mark.slow
def test_waveform_at_the_highest_rate_comes_back_exactly(built: None) -> None:
    # 10 kHz is the firmware's maximum rate; with 2 channels it is loss-free at 500000 baud.
    check_lossless(run_waveform(10_000, 0x03, SECONDS, seed=2))


@pytest.mark.slow
def test_oversampled_reads_average_to_the_injected_value(built: None) -> None:
    # 3 reads per value: the mean's division path (powers of two shift instead)
    check_lossless(run_waveform(2000, 0x05, 2, seed=4, oversampling=3))


@pytest.mark.slow
def test_a_link_too_slow_for_the_rate_drops_whole_frames_and_counts_them(built: None) -> None:
    # 4 channels at 6400 Hz need about 54 kB/s; 500000 baud carries 50 kB/s (PROTOCOL.md 6).
    run = run_waveform(6400, 0x0F, 2, seed=3)
    assert 0.03 * run.taken < run.dropped < 0.15 * run.taken
    check_values_and_markers(run)


def test_real_time_mode_answers_and_samples_live_inputs(built: None) -> None:
    """Paced to the wall clock (the default): a host talks to it like a board, and `now` lines
    change the inputs. No timing is asserted: the machine may be loaded."""
    sim_path = FIRMWARE / "build-sim" / "h2iot_sim"
    elf = FIRMWARE / "build-mega2560" / "h2iot_meter.elf"
    proc = subprocess.Popen(
        [str(sim_path), str(elf)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        pts = proc.stdout.readline().strip()
        proc.stdin.write("now 2500 1250\n")
        proc.stdin.flush()
        reader = _wire.FrameReader()
        deadline = time.monotonic() + 60
        frames: list[_wire.Frame] = []

        def read_until(port: int, done: Callable[[], bool]) -> None:
            while not done():
                assert time.monotonic() < deadline, "the simulator stopped answering"
                if select.select([port], [], [], 0.5)[0]:
                    frames.extend(reader.feed(os.read(port, 4096)))

        port = os.open(pts, os.O_RDWR | os.O_NOCTTY)
        try:
            tty.setraw(port)
            os.write(port, _wire.encode_frame(_wire.IDENTIFY, 0))
            os.write(port, _wire.encode_frame(_wire.START, 1))
            read_until(port, lambda: sum(f.frame_type == _wire.SAMPLES for f in frames) >= 5)
            os.write(port, _wire.encode_frame(_wire.STOP, 2))
            read_until(port, lambda: any(f.frame_type == _wire.STATUS for f in frames))
        finally:
            os.close(port)
        info = next(f for f in frames if f.frame_type == _wire.INFO)
        assert _wire.info_version(info) == (2, (FIRMWARE / "VERSION").read_text().strip())
        values = np.concatenate([_wire.samples(f)[1] for f in frames if f.frame_type == 2])
        assert (values[-5:] == [511, 255]).all()  # floor(mV * 1023 / 5000)
    finally:
        proc.stdin.write("q\n")
        proc.stdin.close()
        proc.wait(timeout=30)
