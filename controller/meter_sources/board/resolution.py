"""What a board channel can see (`controller.meter.resolution`'s record): an ACS712 through the
board's ADC, or an INA219's or INA226's shunt register; `board_facts` answers from a config
alone (the declaration's `facts`), the tap from the device it opened."""

from __future__ import annotations

from typing import Protocol

from controller.config.channels import i2c_address, is_i2c
from controller.config.model import MeterConfig
from controller.errors import ConfigError
from controller.meter.calibration import (
    ACS712_NOISE_PP_MV,
    ACS712_PP_PER_SIGMA,
    Calibration,
    nominal,
)
from controller.meter.device import BoardIdentity
from controller.meter.ina226 import i2c_calibration
from controller.meter.resolution import Resolution

__all__ = [
    "I2cChip",
    "acs712",
    "adc_conversion_us",
    "board_calibration",
    "board_facts",
    "i2c_chip",
    "tap_resolution",
]

# The ACS712's rated range (Allegro ACS712 datasheet: +-5, 20 or 30 A per variant) and its
# analog bandwidth (80 kHz, the datasheet's figure without a FILTER capacitor).
ACS712_RATED_A = {"5A": 5.0, "20A": 20.0, "30A": 30.0}
ACS712_BANDWIDTH_HZ = 80e3

# The firmware's ADC timing (firmware/core/h2_meter.h, h2_sample_prescaler in h2_meter.c): a
# conversion is 13 ADC clocks, a sample's reads run back to back within 90 % of its period,
# and the slowest ADC clock that fits (the most accurate) is taken.
_ADC_CLOCKS = 13
_ADC_PRESCALERS = (128, 64, 32)
_ADC_READ_CYCLES = 64
_ADC_FIXED_CYCLES = 256
_I2C_SENSOR_CYCLES = 4800
_F_CPU_HZ = BoardIdentity().f_cpu_hz  # a Mega's or an Uno's 16 MHz


class I2cChip(Protocol):
    """An INA219 or INA226 calibration (controller/meter/ina219.py, ina226.py)."""

    @property
    def kind(self) -> str: ...

    @property
    def shunt_ohm(self) -> float: ...

    @property
    def current_step_a(self) -> float: ...

    @property
    def max_current_a(self) -> float: ...

    @property
    def noise_basis(self) -> str: ...

    def conversion_us(self, rate_hz: int) -> float | None: ...

    def noise_ua(self, rate_hz: int) -> float: ...


def adc_conversion_us(
    rate_hz: int, reads: int, i2c_sensors: int, f_cpu_hz: int = _F_CPU_HZ
) -> float | None:
    """One ADC conversion at the prescaler the firmware picks for this rate and load (None:
    none fits, the board refuses the configuration)."""
    budget = f_cpu_hz // rate_hz // 10 * 9
    for prescaler in _ADC_PRESCALERS:
        need = (
            reads * (_ADC_CLOCKS * prescaler + _ADC_READ_CYCLES)
            + i2c_sensors * _I2C_SENSOR_CYCLES
            + _ADC_FIXED_CYCLES
        )
        if need <= budget:
            return _ADC_CLOCKS * prescaler / f_cpu_hz * 1e6
    return None


def acs712(
    calibration: Calibration, analog_input: int, rate_hz: int, conversion_us: float | None
) -> Resolution:
    """An ACS712 channel: one ADC code over the sensor's sensitivity, the datasheet's noise, and
    the smaller of its rated range and the current that takes the ADC to its rail."""
    channel = calibration.channel(analog_input)
    sensitivity = channel.sensitivity_mv_per_a
    noise_mv = ACS712_NOISE_PP_MV[channel.variant] / ACS712_PP_PER_SIGMA
    rail_a = (calibration.adc_ref_mv - channel.zero_code * calibration.lsb_mv) / sensitivity
    rated_a = ACS712_RATED_A[channel.variant]
    return Resolution(
        current_ua=calibration.lsb_mv / sensitivity * 1e6,
        supply_v=channel.supply_v,
        basis=f"ACS712-{channel.variant} on A{analog_input}: {calibration.adc_bits}-bit ADC step "
        f"{calibration.lsb_mv:.4g} mV / {sensitivity:g} mV/A",
        sample_rate_hz=float(rate_hz),
        noise_ua=noise_mv / sensitivity * 1e6,
        noise_basis=f"Allegro ACS712 datasheet: {ACS712_NOISE_PP_MV[channel.variant]:g} mV "
        f"peak-to-peak typical output noise, taken as {ACS712_PP_PER_SIGMA:g} sigma",
        full_scale_ua=min(rated_a, rail_a) * 1e6,
        voltage="assumed",
        conversion_us=conversion_us,
        bandwidth_hz=ACS712_BANDWIDTH_HZ,
    )


def i2c_chip(chip: I2cChip, supply_v: float, rate_hz: int) -> Resolution:
    """One LSB of an INA219's or INA226's shunt register through its shunt, at the nominal
    supply (the chip measures the bus voltage too; its step adds I x one bus LSB, far smaller);
    its full scale is the shunt range's current."""
    return Resolution(
        current_ua=chip.current_step_a * 1e6,
        supply_v=supply_v,
        basis=f"{chip.kind.upper()} shunt register LSB over {chip.shunt_ohm:g} ohm",
        sample_rate_hz=float(rate_hz),
        noise_ua=chip.noise_ua(rate_hz),
        noise_basis=chip.noise_basis,
        full_scale_ua=chip.max_current_a * 1e6,
        voltage="measured",
        conversion_us=chip.conversion_us(rate_hz),
    )


def tap_resolution(
    calibration: Calibration,
    client_channel: int,
    chip: I2cChip | None,
    *,
    rate_hz: int,
    analog_inputs: int,
    i2c_sensors: int,
) -> Resolution:
    """The client channel's facts on the Arduino meter: its ACS712 (its ADC timed as the
    firmware does for this many analog inputs and I2C chips), or its I2C chip at the config's
    supply (the nominal calibration holds it for every source)."""
    if chip is None:
        conversion = adc_conversion_us(rate_hz, analog_inputs, i2c_sensors)
        return acs712(calibration, client_channel, rate_hz, conversion)
    return i2c_chip(chip, calibration.channels[0].supply_v, rate_hz)


def board_calibration(meter: MeterConfig) -> Calibration:
    """The config's calibration file, else the nominal one for its analog inputs."""
    if meter.calibration is not None:
        return Calibration.load(meter.calibration)
    inputs = tuple(sorted(c for _role, c in meter.channels if not is_i2c(c)))
    return nominal(inputs or (0,), meter.sensor, meter.supply_v)


def board_facts(meter: MeterConfig) -> Resolution:
    """The serial, virtual and simavr sources' `facts`: the client channel's, from the config
    alone (its calibration file or the nominal one), as the tap will record them."""
    client = meter.channel_of("client")
    if client is None:
        raise ConfigError("meter.channels: the client node must be metered (client = A0, ...)")
    channels = [c for _role, c in meter.channels]
    analog = sum(1 for c in channels if not is_i2c(c))
    chip = i2c_calibration(client, meter.shunt_ohm) if is_i2c(client) else None
    return tap_resolution(
        board_calibration(meter),
        i2c_address(client) if chip is not None else client,
        chip,
        rate_hz=meter.rate_hz,
        analog_inputs=analog,
        i2c_sensors=len(channels) - analog,
    )
