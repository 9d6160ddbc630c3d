"""Firmware in the loop over I2C: the real Mega 2560 firmware in simavr reads INA219 part models
(firmware/sim/ina219_part.c) on the TWI bus, end to end: SET_I2C_CHANNELS, the configuration
write at START, pointer writes and big-endian register reads from the main loop, and the
samples on the wire. The inputs follow a Pi 3B-like power trace with supply droop; V x I from
the samples must match it to within the chip's quantisation."""

from __future__ import annotations

import struct

import numpy as np

from tests.firmware import _ina_loop, _wire
from tests.firmware._sim import ELF, MS, Simulator
from tests.firmware.test_sim import built  # noqa: F401  (the fixture)

RATE_HZ = 500


def test_ina219_power_comes_back_through_the_firmware(built: None) -> None:  # noqa: F811
    power_w = _ina_loop.power_trace(7)
    bus_v, current_a = _ina_loop.supply(power_w)
    with Simulator(ELF, "--ina219", "0x3") as sim:
        sim.advance(20 * MS)
        assert sim.command(_wire.SET_RATE, struct.pack("<I", RATE_HZ)) == 0
        assert sim.command(_wire.SET_I2C_CHANNELS, bytes([0x07])) == 2  # 5 channels with A0, A1
        assert sim.command(_wire.SET_CHANNELS, bytes([0x01])) == 0
        assert sim.command(_wire.SET_I2C_CHANNELS, bytes([0x07])) == 0  # 0x42 is not there
        assert sim.command(_wire.SET_RATE, struct.pack("<I", 1000)) == 2  # faster than it converts
        sim.write_lines([f"{sim.now_ns} 2500\n", f"{sim.now_ns} i 1 -1234 3300\n"])
        levels = _ina_loop.start_with_levels(
            sim,
            lambda j: f"{round(current_a[j] * _ina_loop.SHUNT_OHM * 1e6)} {round(bus_v[j] * 1000)}",
        )
        frames, stderr = _ina_loop.run_until_stopped(sim, levels.last)

    _final, index, values = _ina_loop.samples(frames)
    # the INA219 at 0x41 with constant inputs: -1234 uV -> -123 LSB, 3300 mV -> 825 x 4 mV
    settled = values[20:]
    assert (settled[:, 3] == (-123 & 0xFFFF)).all()
    assert (settled[:, 4] >> 3 == 825).all() and (settled[:, 4] & 2).all()
    # the INA219 at 0x42 does not answer: the failure marks
    assert (values[:, 5] == 0).all() and (values[:, 6] == 0xFFFF).all()

    shunt_v = values[:, 1].astype(np.uint16).view(np.int16) * 10e-6
    bus = (values[:, 2] >> 3) * 4e-3
    assert not (values[:, 2] & 1).any()  # no overflow at 0.1 ohm and 4 W
    measured_w = bus * shunt_v / _ina_loop.SHUNT_OHM
    errors = []
    for j in range(_ina_loop.LEVELS):
        # two samples of settling: the chip's result lags the inputs by up to one conversion
        rows = _ina_loop.settled_rows(index, levels.first, j)
        errors.append(np.abs(measured_w[rows] - power_w[j]).max())
        # quantisation: half an LSB of shunt (5 uV: 0.05 mA) x 5 V and of bus (2 mV) x the
        # current, plus this test's rounding of the inputs to whole uV and mV
        bound = 0.055e-3 * 5.1 + 2.5e-3 * current_a[j] + 1e-6
        assert errors[-1] <= bound, (j, power_w[j], errors[-1])
    assert "INA219 at 0x40" in stderr
