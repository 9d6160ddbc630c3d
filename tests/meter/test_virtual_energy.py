"""End to end: a CPU-load pattern -> virtual meter (own process) -> pty -> reader -> energy,
within 1 % of the virtual meter's ground truth, which is the model's energy for the CPU time the
pattern's processes used."""

from __future__ import annotations

import signal
import subprocess
import sys

import numpy as np
import pytest

from controller.meter.calibration import nominal
from controller.meter.power_model import PI_3B
from controller.meter.session import MeterSession
from controller.meter.truth import Truth
from tests.meter._markers import wait_until_taken
from tests.meter._proc import process_cpu_s

# About 5 s: idle, a busy child, two busy children at once, idle, the parent itself busy.
# Busy loops count CPU time, so the pattern holds on a loaded machine too.
LOAD = """
import subprocess, sys, time
spin = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < {s}: pass"
sys.stdin.readline()
time.sleep(1.0)
subprocess.run([sys.executable, "-c", spin.format(s=0.8)])
kids = [subprocess.Popen([sys.executable, "-c", spin.format(s=0.6)]) for _ in range(2)]
for kid in kids:
    kid.wait()
time.sleep(0.8)
t = time.process_time()
while time.process_time() - t < 0.8:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.mark.slow
def test_energy_through_the_reader_matches_the_ground_truth(tmp_path):
    truth_path = tmp_path / "truth.csv"
    load = subprocess.Popen(
        [sys.executable, "-c", LOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    virtual = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "meter", "virtual",
         "--watch-pid", str(load.pid), "--truth", str(truth_path), "--seed", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert virtual.stdout is not None
        port = virtual.stdout.readline().strip()
        with MeterSession.open(port) as meter:
            info = meter.identify()
            meter.start()
            assert load.stdin is not None
            cpu_before_s = process_cpu_s(load.pid)
            load.stdin.write("go\n")
            load.stdin.flush()
            # The window: the whole pattern (until the load says it is done), then half a
            # second of idle, and at least the five seconds compared below, all counted in
            # samples the board has taken.
            assert load.stdout is not None and load.stdout.readline() == "done\n"
            load_cpu_s = process_cpu_s(load.pid) - cpu_before_s  # its children reaped
            rate = info.sample_rate_hz
            wait_until_taken(meter, max(5 * rate, meter.samples.next_index + rate // 2))
            final = meter.stop()
            window = meter.samples.all()
    finally:
        virtual.send_signal(signal.SIGTERM)
        virtual.wait(timeout=10)
        load.kill()
        load.wait()

    assert final.samples_taken == len(window.indices)  # nothing lost
    truth = Truth.load(truth_path).per_sample(analog_input=0)
    assert len(truth) == final.samples_taken
    measured_mw = nominal((0, 1)).power_mw(window.values[:, 0], 0)
    truth_mw = truth[window.indices]

    # The pattern is visible in the truth: idle at 1.2 W, and above it the model's energy for
    # the CPU time the pattern got, however little of a core a loaded machine gave it.
    assert truth_mw.min() == pytest.approx(PI_3B.idle_mw)
    assert load_cpu_s > 2.8 * 0.9  # its busy loops' 2.8 s (process_time), in ticks
    truth_above_idle_mj = (truth_mw - PI_3B.idle_mw).sum() / rate
    assert truth_above_idle_mj == pytest.approx(PI_3B.mj_per_cpu_s * load_cpu_s, rel=0.03)
    energy_mj = measured_mw.sum() / rate
    truth_mj = truth_mw.sum() / rate
    assert energy_mj == pytest.approx(truth_mj, rel=0.01)
    # and per second of the pattern too
    for k in range(5):
        part = slice(k * rate, (k + 1) * rate)
        assert np.mean(measured_mw[part]) == pytest.approx(np.mean(truth_mw[part]), rel=0.02)
