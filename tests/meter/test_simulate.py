"""`h2iot meter simulate`: the real firmware in simavr, fed by the power model of a process
tree; read like a board: energy within 1 % of the ground truth, the ground truth the model's
energy for the CPU time the watched process used, marker edges stamped with the sample count of
their moment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from controller.meter.calibration import nominal
from controller.meter.ina219 import Ina219Model
from controller.meter.power_model import PI_3B
from controller.meter.session import MeterSession
from controller.meter.simulate import SimulatedMeter, SimulateOptions
from controller.meter.truth import Truth
from tests.conftest import require_tool
from tests.meter._markers import stamped_edge, wait_until_taken
from tests.meter._proc import process_cpu_s

# Busy for one CPU-second once told to go, then says so: the run covers all of it however
# slowly a loaded machine gets through it.
LOAD = """
import sys, time
sys.stdin.readline()
t = time.process_time()
while time.process_time() - t < 1.0:
    pass
print("done", flush=True)
time.sleep(30)
"""
RATE_HZ = 1000  # the firmware's rate after reset


@pytest.fixture(scope="module")
def harness_buildable() -> None:
    require_tool("make", "gcc", "avr-gcc", "simavr")
    if not Path("/usr/include/simavr/sim_avr.h").exists():
        message = "needs libsimavr-dev"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.slow
def test_simulated_board_energy_and_markers(harness_buildable, tmp_path):
    truth_path = tmp_path / "truth.csv"
    fifo = tmp_path / "marker"
    load = subprocess.Popen(
        [sys.executable, "-c", LOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    sim = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "meter", "simulate", "--watch-pid",
         str(load.pid), "--truth", str(truth_path), "--marker-fifo", str(fifo), "--seed", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None and sim.stderr is not None
        port = sim.stdout.readline().strip()
        assert port.startswith("/dev/"), sim.stderr.read()
        with MeterSession.open(port, ack_timeout_s=10) as meter:
            info = meter.identify(timeout_s=10)
            assert (info.board, info.protocol_version) == ("mega2560", 2)
            meter.start()
            marker = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            try:
                wait_until_taken(meter, 500)  # idle first
                rising = stamped_edge(meter, marker, 1)
                assert load.stdin is not None and load.stdout is not None
                cpu_before_s = process_cpu_s(load.pid)
                load.stdin.write("go\n")
                load.stdin.flush()
                assert load.stdout.readline() == "done\n"
                wait_until_taken(meter, rising + 1000)  # 1 s at 1 kHz, in the board's count
                falling = stamped_edge(meter, marker, 0)
                wait_until_taken(meter, falling + 500)  # idle again
                load_cpu_s = process_cpu_s(load.pid) - cpu_before_s
            finally:
                os.close(marker)
            final = meter.stop()
            window = meter.samples.all()
            markers = meter.markers()
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=20)
        load.kill()
        load.wait()

    assert final.samples_dropped == 0
    assert final.samples_taken == len(window.indices)
    truth_mw = Truth.load(truth_path).per_sample(analog_input=0)[window.indices]
    # The busy second shows as the model's energy for the CPU time the load got, however
    # little of a core a loaded machine gave it (/proc counts in 10 ms ticks).
    assert load_cpu_s > 0.9  # its busy second (process_time), in ticks
    truth_above_idle_mj = (truth_mw - PI_3B.idle_mw).sum() / RATE_HZ
    assert truth_above_idle_mj == pytest.approx(PI_3B.mj_per_cpu_s * load_cpu_s, rel=0.03)
    measured_mw = nominal((0, 1)).power_mw(window.values[:, 0], 0)
    assert measured_mw.sum() == pytest.approx(truth_mw.sum(), rel=0.01)

    assert [(m.marker.edge, m.sample_index) for m in markers] == [(1, rising), (0, falling)]
    assert falling - rising >= 1000


@pytest.mark.slow
def test_simulated_board_reads_an_ina219_over_i2c(harness_buildable):
    """The simavr source with an INA219: the firmware reads the part over TWI and V x I comes
    back as the power model's idle power (nothing watched), the bus voltage with its droop."""
    simulated = SimulatedMeter(SimulateOptions(seed=5, ina219_sources=(0,)))
    thread = threading.Thread(target=simulated.run, daemon=True)
    thread.start()
    try:
        with MeterSession.open(simulated.port, ack_timeout_s=10) as meter:
            meter.identify(timeout_s=10)
            meter.set_rate(800)
            meter.set_i2c_channels(0x01)
            meter.set_channels(0x00)
            meter.start()
            wait_until_taken(meter, 400)
            meter.stop()
            window = meter.samples.all()
    finally:
        simulated.request_stop()
        thread.join(timeout=10)
        simulated.close()
    values = window.values
    assert values.shape[1] == 2 and len(values) >= 400
    model = Ina219Model()
    power = model.calibration.power_mw(values[20:, 0], values[20:, 1])
    assert abs(power.mean() - PI_3B.idle_mw) < 0.005 * PI_3B.idle_mw
    assert ((values[20:, 1] >> 3) * 4 < 5100).all()  # the supply droops under load
