"""A trial's power window when its marker edges share a sample: a virtual meter whose thread
reads both edges in one wake (as under load, or for a trial shorter than a sample) stamps them
alike; the window then comes from the trial's clock times, not a window of no length."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from controller.config.model import MeterConfig
from controller.energy import energy_in_window
from controller.meter.calibration import nominal
from controller.meter.node_power import WatchSpec
from controller.meter.session import MeterSession
from controller.sweep.meter_tap import MeterTap
from controller.sweep.setup import _device
from tests.meter._markers import wait_until_taken

TRIAL_S = 0.02


def test_edges_stamped_in_one_sample_fall_back_to_the_clock(tmp_path: Path) -> None:
    fifo = tmp_path / "flaky-marker.fifo"
    watch = (WatchSpec("pid", str(os.getpid())),)
    with _device(MeterConfig(source="virtual"), watch, tmp_path, fifo) as (port, facts, error):
        session = MeterSession.open(port)
        marker = -1
        try:
            session.identify()
            session.start()
            wait_until_taken(session, 100)
            marker = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            tap = MeterTap(session, nominal(), 0, "virtual", facts, source_error=error)
            tap.begin_trial()
            start_ns = time.time_ns()
            time.sleep(TRIAL_S)
            end_ns = time.time_ns()
            os.write(marker, b"1\n0\n")  # both edges in one read: one stamp
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
    assert power.end_s - power.start_s == pytest.approx((end_ns - start_ns) / 1e9, rel=1e-6)
    energy = energy_in_window(power.t_s, power.power_mw, power.start_s, power.end_s)
    assert energy.energy_mj > 0
