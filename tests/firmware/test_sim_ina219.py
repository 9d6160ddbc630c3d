"""Firmware in the loop over I2C: the real Mega 2560 firmware in simavr reads INA219 part models
(firmware/sim/ina219_part.c) on the TWI bus, end to end: SET_I2C_CHANNELS, the configuration
write at START, pointer writes and big-endian register reads from the main loop, and the
samples on the wire. The inputs follow a Pi 3B-like power trace with supply droop; V x I from
the samples must match it to within the chip's quantisation."""

from __future__ import annotations

import struct

import numpy as np

from tests.firmware import _wire
from tests.firmware._sim import ELF, MS, Simulator
from tests.firmware.test_sim import built  # noqa: F401  (the fixture)

SHUNT_OHM = 0.1
RATE_HZ = 500
HOLD = 10  # samples per power level
LEVELS = 60


def supply(power_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 5.1 V supply with 60 mOhm of cable and the shunt: bus volts and amps at the load."""
    r = 0.06 + SHUNT_OHM
    # P = V I, V = 5.1 - r I  ->  r I^2 - 5.1 I + P = 0
    current = (5.1 - np.sqrt(5.1**2 - 4 * r * power_w)) / (2 * r)
    return 5.1 - 0.06 * current - SHUNT_OHM * current, current


def test_ina219_power_comes_back_through_the_firmware(built: None) -> None:  # noqa: F811
    rng = np.random.default_rng(7)
    power_w = rng.uniform(1.0, 4.0, LEVELS)
    power_w[::7] = rng.uniform(0.005, 0.05, len(power_w[::7]))  # a sleeping MCU-class load
    bus_v, current_a = supply(power_w)
    with Simulator(ELF, "--ina219", "0x3") as sim:
        sim.advance(20 * MS)
        assert sim.command(_wire.SET_RATE, struct.pack("<I", RATE_HZ)) == 0
        assert sim.command(_wire.SET_I2C_CHANNELS, bytes([0x07])) == 2  # 5 channels with A0, A1
        assert sim.command(_wire.SET_CHANNELS, bytes([0x01])) == 0
        assert sim.command(_wire.SET_I2C_CHANNELS, bytes([0x07])) == 0  # 0x42 is not there
        assert sim.command(_wire.SET_RATE, struct.pack("<I", 1000)) == 2  # faster than it converts
        sim.write_lines([f"{sim.now_ns} 2500\n", f"{sim.now_ns} i 1 -1234 3300\n"])
        assert sim.command(_wire.START) == 0
        t0, period = sim.clock()
        first = (sim.now_ns - t0) // period + 2
        lines = []
        for j in range(LEVELS):
            t = t0 + (first + j * HOLD - 1) * period + period // 2
            shunt_uv = round(current_a[j] * SHUNT_OHM * 1e6)
            lines.append(f"{t} i 0 {shunt_uv} {round(bus_v[j] * 1000)}\n")
        last = first + LEVELS * HOLD
        lines.append(f"{t0 + last * period + 100 * MS}\n")
        sim.write_lines(lines)
        sim.now_ns = t0 + last * period + 100 * MS

        def through_last() -> bool:
            for f in reversed(sim.snapshot()):
                if f.frame_type == _wire.SAMPLES:
                    index, values = _wire.samples(f)
                    return bool(index + len(values) > last)
            return False

        sim.wait_until(through_last, timeout_s=120)
        assert sim.command(_wire.STOP) == 0
        sim.advance_until(
            lambda: any(
                f.frame_type == _wire.STATUS and _wire.status(f).running == 0
                for f in sim.snapshot()[-4:]
            )
        )
        frames = sim.snapshot()
        stderr = sim.close()

    final = [_wire.status(f) for f in frames if f.frame_type == _wire.STATUS][-1]
    assert final.samples_dropped == 0
    chunks = [_wire.samples(f) for f in frames if f.frame_type == _wire.SAMPLES]
    assert all(v.shape[1] == 7 for _, v in chunks)  # A0, then (shunt, bus) x 3
    index = np.concatenate([i + np.arange(len(v)) for i, v in chunks])
    values = np.concatenate([v for _, v in chunks]).astype(np.int64)
    assert (np.diff(index) == 1).all() and index[0] == 0
    assert (values[:, 0] == 511).all()  # A0 at 2500 mV: floor(2500 * 1023 / 5000)
    # the INA219 at 0x41 with constant inputs: -1234 uV -> -123 LSB, 3300 mV -> 825 x 4 mV
    settled = values[20:]
    assert (settled[:, 3] == (-123 & 0xFFFF)).all()
    assert (settled[:, 4] >> 3 == 825).all() and (settled[:, 4] & 2).all()
    # the INA219 at 0x42 does not answer: the failure marks
    assert (values[:, 5] == 0).all() and (values[:, 6] == 0xFFFF).all()

    shunt_v = values[:, 1].astype(np.uint16).view(np.int16) * 10e-6
    bus = (values[:, 2] >> 3) * 4e-3
    assert not (values[:, 2] & 1).any()  # no overflow at 0.1 ohm and 4 W
    measured_w = bus * shunt_v / SHUNT_OHM
    errors = []
    for j in range(LEVELS):
        # two samples of settling: the chip's result lags the inputs by up to one conversion
        rows = (index >= first + j * HOLD + 2) & (index < first + (j + 1) * HOLD)
        assert rows.sum() == HOLD - 2
        errors.append(np.abs(measured_w[rows] - power_w[j]).max())
        # quantisation: half an LSB of shunt (5 uV: 0.05 mA) x 5 V and of bus (2 mV) x the
        # current, plus this test's rounding of the inputs to whole uV and mV
        bound = 0.055e-3 * 5.1 + 2.5e-3 * current_a[j] + 1e-6
        assert errors[-1] <= bound, (j, power_w[j], errors[-1])
    assert "INA219 at 0x40" in stderr
