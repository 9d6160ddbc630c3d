"""One step of a board channel (`controller.meter.resolution`'s record): an ACS712 through the
board's ADC, or an INA219's or INA226's shunt register."""

from __future__ import annotations

from typing import Protocol

from controller.meter.calibration import Calibration
from controller.meter.resolution import Resolution

__all__ = ["I2cChip", "acs712", "i2c_chip", "tap_resolution"]


class I2cChip(Protocol):
    """An INA219 or INA226 calibration (controller/meter/ina219.py, ina226.py)."""

    @property
    def kind(self) -> str: ...

    @property
    def shunt_ohm(self) -> float: ...

    @property
    def current_step_a(self) -> float: ...


def acs712(calibration: Calibration, analog_input: int) -> Resolution:
    """One ADC code on an ACS712 channel: the ADC's step over the sensor's sensitivity."""
    channel = calibration.channel(analog_input)
    step_ua = calibration.lsb_mv / channel.sensitivity_mv_per_a * 1e6
    return Resolution(
        step_ua,
        channel.supply_v,
        f"ACS712-{channel.variant} on A{analog_input}: {calibration.adc_bits}-bit ADC step "
        f"{calibration.lsb_mv:.4g} mV / {channel.sensitivity_mv_per_a:g} mV/A",
    )


def i2c_chip(chip: I2cChip, supply_v: float) -> Resolution:
    """One LSB of an INA219's or INA226's shunt register through its shunt, at the nominal
    supply (the chip measures the bus voltage too; its step adds I x one bus LSB, far smaller)."""
    return Resolution(
        chip.current_step_a * 1e6,
        supply_v,
        f"{chip.kind.upper()} shunt register LSB over {chip.shunt_ohm:g} ohm",
    )


def tap_resolution(
    calibration: Calibration, client_channel: int, chip: I2cChip | None
) -> Resolution:
    """The client channel's step on the Arduino meter: its ACS712, or its I2C chip at the
    config's supply (the nominal calibration holds it for every source)."""
    if chip is None:
        return acs712(calibration, client_channel)
    return i2c_chip(chip, calibration.channels[0].supply_v)
