"""A trial's power window from its marker edges: a meter that reads its marker line late (a
busy machine's thread, here a stopped process) still gives it, once its stream passes the
trial's end; edges on one sample (a trial shorter than a sample) give the trial's clock
times instead, saying why, not a window of no length."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.config.model import MeterConfig
from controller.energy import energy_in_window
from controller.meter.calibration import nominal
from controller.meter.node_power import WatchSpec
from controller.meter.session import MeterSession
from controller.meter_sources.board.tap import MeterTap
from controller.sweep.setup import _device
from tests.meter._markers import wait_until_taken

TRIAL_S = 0.02


def _trial_tap(
    session: MeterSession,
    samples: int,
    facts: dict[str, Any],
    source_error: Callable[[], BaseException | None] | None = None,
) -> MeterTap:
    """A tap on a started run, `samples` in, at the start of a trial."""
    session.identify()
    session.start()
    wait_until_taken(session, samples)
    tap = MeterTap(session, nominal(), 0, "virtual", facts, source_error=source_error)
    tap.begin_trial()
    return tap


def test_edges_stamped_in_one_sample_fall_back_to_the_clock(tmp_path: Path) -> None:
    fifo = tmp_path / "flaky-marker.fifo"
    watch = (WatchSpec("pid", str(os.getpid())),)
    with _device(MeterConfig(source="virtual"), watch, tmp_path, fifo) as (port, facts, error):
        session = MeterSession.open(port)
        marker = -1
        try:
            tap = _trial_tap(session, 100, facts, error)
            marker = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            start_ns = time.time_ns()
            time.sleep(TRIAL_S)
            end_ns = time.time_ns()
            os.write(marker, b"1\n0\n")  # unstamped, both edges in one read: one stamp
            deadline = time.monotonic() + 10
            while len(session.markers()) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            rising, falling = session.markers()
            assert rising.sample_index == falling.sample_index
            power = tap.window(start_ns, end_ns)
        finally:
            if marker >= 0:
                os.close(marker)
            session.close()
    assert power.source == "clock"
    assert power.clock_reason.startswith(f"both marker edges on sample {rising.sample_index}")
    assert power.end_s - power.start_s == pytest.approx((end_ns - start_ns) / 1e9, rel=1e-6)
    energy = energy_in_window(power.t_s, power.power_mw, power.start_s, power.end_s)
    assert energy.energy_mj > 0


def test_a_meter_reading_its_marker_late_still_cuts_the_window_by_the_edges(
    tmp_path: Path,
) -> None:
    """The meter's process is stopped through the trial and resumed only after the tap asked
    for the window: the edges reach it late, after the trial's end by the controller's clock,
    and are stamped with their own instants; the tap waits for the stream to pass that end."""
    fifo = tmp_path / "marker.fifo"
    meter = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "meter", "virtual", "--marker-fifo", str(fifo)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert meter.stdout is not None
    port = meter.stdout.readline().strip()
    session = MeterSession.open(port)
    line = -1
    try:
        tap = _trial_tap(session, 500, {})
        line = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        meter.send_signal(signal.SIGSTOP)
        start_ns, rose_ns = time.time_ns(), time.monotonic_ns()
        time.sleep(0.3)
        end_ns, fell_ns = time.time_ns(), time.monotonic_ns()
        os.write(line, f"1 {rose_ns}\n0 {fell_ns}\n".encode())
        threading.Timer(0.5, meter.send_signal, (signal.SIGCONT,)).start()
        power = tap.window(start_ns, end_ns)
    finally:
        meter.send_signal(signal.SIGCONT)
        if line >= 0:
            os.close(line)
        session.close()
        meter.terminate()
        meter.wait(timeout=10)
    assert (power.source, power.clock_reason) == ("marker", "")
    # The edges' own instants, 0.3 s or more apart, to a sample at 1 kHz.
    width_s = (fell_ns - rose_ns) / 1e9
    assert power.end_s - power.start_s == pytest.approx(width_s, abs=0.0011)
