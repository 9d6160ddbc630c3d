"""The virtual meter presents INA219 channels (protocol 2) as the firmware does: the device
model's checks, INFO and column layout, and V x I from its power model through a real pty."""

from __future__ import annotations

import os
import select
import time

import numpy as np
import pytest

from controller.config.model import MeterConfig
from controller.meter.commands import (
    CommandEncoder,
    Identify,
    SetChannels,
    SetI2cChannels,
    SetRate,
    Start,
    Stop,
)
from controller.meter.decoder import FrameDecoder
from controller.meter.device import DeviceCore, check_config
from controller.meter.ina219 import Ina219Calibration
from controller.meter.protocol import Ack, AckResult, Info, Samples
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from controller.meter_sources.board.tap import open_board_tap
from controller.sweep.meter_tap import TapRequest
from tests.meter.test_device import ramp


def registers(first: int, count: int, addresses: tuple[int, ...]) -> np.ndarray:
    """Shunt = the sample index, bus = 0x2712 + the address: recognisable columns."""
    out = np.empty((count, 2 * len(addresses)), dtype=np.uint16)
    for k, address in enumerate(addresses):
        out[:, 2 * k] = np.arange(first, first + count)
        out[:, 2 * k + 1] = 0x2712 + address
    return out


@pytest.mark.parametrize(
    ("rate", "mask", "reads", "i2c", "result"),
    [
        (800, 0x03, 1, 0x01, AckResult.OK),
        (800, 0x00, 1, 0x03, AckResult.OK),
        (800, 0x00, 1, 0x00, AckResult.BAD_VALUE),
        (800, 0x07, 1, 0x03, AckResult.BAD_VALUE),  # 5 channels
        (800, 0x01, 1, 0x10, AckResult.BAD_VALUE),  # only 0x40..0x43
        (1000, 0x00, 1, 0x01, AckResult.BAD_VALUE),  # faster than the chip converts
        (800, 0x00, 1, 0x0F, AckResult.BAD_VALUE),  # four INA219 reads do not fit
    ],
)
def test_i2c_config_checks_match_the_firmware(rate, mask, reads, i2c, result):
    assert check_config(16_000_000, rate, mask, reads, i2c) == result


def run_device(device: DeviceCore, commands: list, seconds: float) -> list:
    encoder, decoder, frames = CommandEncoder(), FrameDecoder(), []
    for command in commands:
        device.receive(encoder.encode(command)[1], 0.0)
    t = 0.0
    while t < seconds:
        t += 0.01
        device.advance(t)
    device.receive(encoder.encode(Stop())[1], seconds)
    frames += decoder.feed(device.output())
    return frames


def test_device_lays_out_analog_then_shunt_and_bus_per_ina219():
    device = DeviceCore(ramp, None, registers)
    commands = [SetRate(500), SetChannels(0x01), SetI2cChannels(0x05), Identify(), Start()]
    frames = run_device(device, commands, 0.2)
    assert [f.result for f in frames if isinstance(f, Ack)] == [0] * 6
    (info,) = [f for f in frames if isinstance(f, Info)]
    assert (info.i2c_mask, info.i2c_addresses, info.columns) == (0x05, (0x40, 0x42), 5)
    values = np.concatenate([f.values for f in frames if isinstance(f, Samples)])
    assert values.shape[0] >= 100 and values.shape[1] == 5
    index = np.arange(len(values))
    assert (values[:, 0] == index % 1024).all()
    assert (values[:, 1] == index).all() and (values[:, 3] == index).all()
    assert (values[:, 2] == 0x2752).all() and (values[:, 4] == 0x2754).all()


def test_a_board_without_the_chip_sends_the_failure_marks():
    frames = run_device(
        DeviceCore(ramp), [SetRate(500), SetI2cChannels(1), SetChannels(0), Start()], 0.1
    )
    values = np.concatenate([f.values for f in frames if isinstance(f, Samples)])
    assert values.shape[0] >= 50 and values.shape[1] == 2
    assert (values[:, 0] == 0).all() and (values[:, 1] == 0xFFFF).all()


def test_virtual_meter_ina219_reads_its_power_model_as_v_times_i():
    meter = VirtualMeter(VirtualMeterOptions(seed=3))  # nothing watched: the model's idle power
    meter.start()
    fd = os.open(meter.port, os.O_RDWR | os.O_NOCTTY)
    try:
        encoder, decoder, frames = CommandEncoder(), FrameDecoder(), []
        for command in (SetRate(500), SetChannels(0x01), SetI2cChannels(0x01), Start()):
            os.write(fd, encoder.encode(command)[1])
            time.sleep(0.02)
        deadline = time.monotonic() + 10
        while sum(len(f.values) for f in frames if isinstance(f, Samples)) < 200:
            assert time.monotonic() < deadline
            if select.select([fd], [], [], 0.2)[0]:
                frames += decoder.feed(os.read(fd, 4096))
        os.write(fd, encoder.encode(Stop())[1])
    finally:
        os.close(fd)
        meter.close()
    values = np.concatenate([f.values for f in frames if isinstance(f, Samples)])
    assert values.shape[1] == 3
    model = meter.options.ina219
    calibration: Ina219Calibration = model.calibration
    power = calibration.power_mw(values[:, 1], values[:, 2])
    idle_mw = meter.options.model.idle_mw
    assert abs(power.mean() - idle_mw) < 0.005 * idle_mw  # V x I measured, not I x 5 V
    bus = (values[:, 2] >> 3) * 4e-3
    assert (bus < model.supply_v).all() and (values[:, 2] & 2).all()
    assert np.ptp(power) < 20 * calibration.power_step_mw(idle_mw)  # the noise is the chip's


def test_a_sweep_tap_on_an_ina219_channel_measures_v_times_i():
    """meter.channels.client = "INA219@0x40" through the sweep's tap: SET_I2C_CHANNELS, the
    client's two columns, and the power the run records."""
    meter = VirtualMeter(VirtualMeterOptions(seed=4))
    meter.start()
    try:
        config = MeterConfig(rate_hz=800, channels=(("client", 0x40),), shunt_ohm=0.1)
        tap = open_board_tap(TapRequest(config, meter.port, {}))
        try:
            idle = tap.idle_baseline_mw(0.3)
            facts = tap.facts()
            rate_hz = tap.rate_hz
        finally:
            tap.session.close()
    finally:
        meter.close()
    assert abs(idle - meter.options.model.idle_mw) < 0.005 * meter.options.model.idle_mw
    assert rate_hz == 800  # the INFO as configured, not the one before SET_RATE
    assert facts["client_sensor"] == "ina219" and facts["i2c_mask"] == 0x01
    assert facts["ina219"] == {"address": 0x40, "shunt_ohm": 0.1, "pga": 8}
