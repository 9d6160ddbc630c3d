"""The virtual meter presents INA226 channels as the firmware 1.2.0 does: the device model's
checks (bit 4 + n of the I2C mask marks the chip at 0x40 + n as an INA226), INFO and column
layout, and V x I from its power model in the INA226's scales, through a real pty and the
controller's own meter session, set up from config channels with the config's helpers."""

from __future__ import annotations

import time

import numpy as np
import pytest

from controller.config.channels import (
    channel_source,
    i2c_mask,
    is_i2c,
)
from controller.meter.commands import Identify, SetChannels, SetI2cChannels, SetRate, Start
from controller.meter.device import DeviceCore, check_config
from controller.meter.ina219 import Ina219Calibration
from controller.meter.ina226 import Ina226Calibration
from controller.meter.protocol import Ack, AckResult, Info, Samples
from controller.meter.session import MeterSession
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from tests.meter.test_device import ramp
from tests.meter.test_virtual_ina219 import registers, run_device

INA226_AT_0X40 = 0x140  # the config's channel for "INA226@0x40"


@pytest.mark.parametrize(
    ("rate", "mask", "reads", "i2c", "result"),
    [
        (1000, 0x00, 1, 0x11, AckResult.OK),  # an INA226 converts fast enough for 1 kHz
        (1000, 0x00, 1, 0x13, AckResult.BAD_VALUE),  # ... an INA219 beside it does not
        (800, 0x01, 1, 0x13, AckResult.OK),
        (1000, 0x00, 1, 0x21, AckResult.BAD_VALUE),  # a kind for a chip not sampled
        (2500, 0x00, 1, 0x11, AckResult.OK),  # 2 x 140 us fits 400 us
        (4000, 0x00, 1, 0x11, AckResult.BAD_VALUE),  # no configuration fits 250 us
        (1000, 0x03, 1, 0x33, AckResult.OK),  # four channels
    ],
)
def test_ina226_config_checks_match_the_firmware(
    rate: int, mask: int, reads: int, i2c: int, result: AckResult
) -> None:
    """The same cases as firmware/tests/test_meter.c's test_ina226."""
    assert check_config(16_000_000, rate, mask, reads, i2c) == result


def test_config_channels_make_the_firmwares_i2c_mask() -> None:
    channels = (0, 0x41, INA226_AT_0X40, 0x143)
    assert i2c_mask(channels) == 0b1001_1011  # chips 0x40, 0x41, 0x43; INA226s 0x40, 0x43
    assert [channel_source(c) for c in channels if is_i2c(c)] == [1, 0, 3]


def test_device_reports_the_ina226_kind_and_keeps_two_columns_per_chip() -> None:
    device = DeviceCore(ramp, None, registers)
    commands = [SetRate(1000), SetI2cChannels(0x11), SetChannels(0x00), Identify(), Start()]
    frames = run_device(device, commands, 0.2)
    assert [f.result for f in frames if isinstance(f, Ack)] == [0] * 6
    (info,) = [f for f in frames if isinstance(f, Info)]
    assert (info.i2c_addresses, info.ina226_addresses, info.columns) == ((0x40,), (0x40,), 2)
    values = np.concatenate([f.values for f in frames if isinstance(f, Samples)])
    assert values.shape[0] >= 150 and (values[:, 1] == 0x2752).all()
    assert device.ina226_addresses == (0x40,)


def test_virtual_meter_ina226_beside_an_ina219_reads_v_times_i_in_its_own_scales() -> None:
    """INA226 at 0x40 (source 0) and INA219 at 0x41 (source 1), set up through MeterSession
    with the mask the config's channels make."""
    meter = VirtualMeter(VirtualMeterOptions(seed=5))  # nothing watched: the model's idle power
    meter.start()
    try:
        with MeterSession.open(meter.port) as session:
            session.identify()
            session.set_rate(800)
            session.set_i2c_channels(i2c_mask((INA226_AT_0X40, 0x41)))
            session.set_channels(0x00)
            info = session.identify()
            session.start()
            deadline = time.monotonic() + 10
            while session.samples.received < 400:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            session.stop()
            values = session.samples.all().values
    finally:
        meter.close()
    assert (info.i2c_mask, info.i2c_addresses, info.ina226_addresses) == (
        0x13,
        (0x40, 0x41),
        (0x40,),
    )
    assert values.shape[1] == 4
    idle_mw = meter.options.model.idle_mw
    ina226 = Ina226Calibration(0x40, shunt_ohm=meter.options.ina219.calibration.shunt_ohm)
    ina219 = Ina219Calibration(0x41, shunt_ohm=meter.options.ina219.calibration.shunt_ohm)
    p226 = ina226.power_mw(values[:, 0], values[:, 1])
    p219 = ina219.power_mw(values[:, 2], values[:, 3])
    assert abs(p226.mean() - idle_mw) < 0.002 * idle_mw  # V x I in the INA226's scales
    assert abs(p219.mean() - idle_mw) < 0.005 * idle_mw
    assert (values[:, 1] < 0x8000).all() and (values[:, 3] & 2).all()  # no CNVR in an INA226
    # one INA226 step is finer than one INA219 step, and its noise is the chip's
    assert ina226.power_step_mw(idle_mw) < ina219.power_step_mw(idle_mw) / 3
    assert np.ptp(p226) < 20 * ina226.power_step_mw(idle_mw)
    assert np.std(p226) < np.std(p219)
