"""Firmware in the loop over I2C with INA226s: the real Mega 2560 firmware in simavr reads INA226
part models (firmware/sim/ina226_part.c, timed and averaged conversions) on the TWI bus, end
to end: SET_I2C_CHANNELS with the INA226 kind bits, the identity check, the configuration for
the sample rate and the wait for its first result at START, the register reads from the main
loop, and the samples on the wire. The inputs follow a Pi 3B-like power trace with supply
droop; V x I from the samples must match it to within the chip's quantisation. A chip that
does not name itself as an INA226 (an INA219 at an address configured as INA226) gives the
failure marks, never readings in the wrong scale."""

from __future__ import annotations

import re
import struct
import subprocess

import numpy as np

from tests.firmware import _ina_loop, _wire
from tests.firmware._sim import ELF, HARNESS, MS, Simulator
from tests.firmware.test_sim import built  # noqa: F401  (the fixture)

RATE_HZ = 500  # the firmware's configuration for it: 4 averages of 204 us shunt + 204 us bus
RESULT_US = 4 * 2 * 204
INA226_AT_0X40_0X41_0X42 = 0x77  # chips 0x40..0x42 (bits 0..2), all INA226s (bits 4..6)


def test_ina226_power_comes_back_through_the_firmware(built: None) -> None:  # noqa: F811
    power_w = _ina_loop.power_trace(11)
    bus_v, current_a = _ina_loop.supply(power_w)
    with Simulator(ELF, "--ina226", "0x3", "--ina219", "0x4") as sim:
        sim.advance(20 * MS)
        assert sim.command(_wire.SET_RATE, struct.pack("<I", RATE_HZ)) == 0
        assert sim.command(_wire.SET_CHANNELS, bytes([0x01])) == 0
        assert sim.command(_wire.SET_I2C_CHANNELS, bytes([0x21])) == 2  # a kind, no chip
        assert sim.command(_wire.SET_I2C_CHANNELS, bytes([INA226_AT_0X40_0X41_0X42])) == 0
        assert sim.command(_wire.SET_RATE, struct.pack("<I", 4000)) == 2  # no configuration fits
        before = len(sim.snapshot())
        assert sim.command(_wire.IDENTIFY) == 0
        info = sim.first_after(before, _wire.INFO)
        assert info.payload[23] == INA226_AT_0X40_0X41_0X42  # i2c_mask, kinds included
        sim.write_lines([f"{sim.now_ns} 2500\n", f"{sim.now_ns} i 1 -1234.5 3300.6\n"])
        start_ns = sim.now_ns
        levels = _ina_loop.start_with_levels(
            sim, lambda j: f"{current_a[j] * _ina_loop.SHUNT_OHM * 1e6:.4f} {bus_v[j] * 1000:.4f}"
        )
        frames, stderr = _ina_loop.run_until_stopped(sim, levels.last)

    final, index, values = _ina_loop.samples(frames)
    # the INA226 at 0x41 with constant inputs, from sample 0 on (START waited for a result of
    # the new configuration): -1234.5 uV -> -494 x 2.5 uV, 3300.6 mV -> 2640 x 1.25 mV
    assert (values[:, 3] == (-494 & 0xFFFF)).all()
    assert (values[:, 4] == 2640).all()
    # the INA219 at 0x42 does not name itself as an INA226: the failure marks, all run long
    assert (values[:, 5] == 0).all() and (values[:, 6] == 0xFFFF).all()

    shunt_v = values[:, 1].astype(np.uint16).view(np.int16) * 2.5e-6
    bus = values[:, 2] * 1.25e-3
    assert (values[:, 2] < 0x8000).all()
    measured_w = bus * shunt_v / _ina_loop.SHUNT_OHM
    for j in range(_ina_loop.LEVELS):
        # two samples of settling: a result integrates the 1632 us before it completed
        rows = _ina_loop.settled_rows(index, levels.first, j)
        error = np.abs(measured_w[rows] - power_w[j]).max()
        # quantisation: half an LSB of shunt (1.25 uV: 12.5 uA) x 5.1 V and of bus (0.625 mV)
        # x the current; the inputs carry 4 decimals
        bound = 12.5e-6 * 5.1 + 0.625e-3 * current_a[j] + 1e-7
        assert error <= bound, (j, power_w[j], error, bound)
    # the chip converted with the configuration for 500 Hz while sampling ran: one result
    # per 1632 us (the power-on configuration's 2.2 ms made the few before START; the part
    # is not addressed, so counts nothing, after the last sample; the wrong configurations
    # would be 28 % to 3 x off)
    found = re.search(r"INA226 at 0x40: \d+ register reads, \d+ writes, (\d+) results", stderr)
    assert found is not None, stderr
    during = (final.samples_taken + 1) * levels.period / (RESULT_US * 1000)  # + START's wait
    assert during - 2 <= int(found.group(1)) <= during + start_ns / 2.2e6 + 3


def test_one_address_cannot_hold_both_chips(built: None) -> None:  # noqa: F811
    result = subprocess.run(
        [str(HARNESS), "--fast", "--ina219", "0x2", "--ina226", "0x3", str(ELF)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "--ina219 and --ina226 both put a chip at 0x41" in result.stderr
