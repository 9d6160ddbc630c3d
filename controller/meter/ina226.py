"""The INA226 channel kind: its registers on the wire -> volts, amps, watts; the configuration
the firmware writes for a sample rate; its calibration; and a model of the chip for the
virtual meter.

An INA226 sits on the INA219's I2C channels (0x40..0x43; bit 4 + n of the I2C mask marks the
chip at 0x40 + n as an INA226, firmware/PROTOCOL.md section 3) and a sample carries the same
two raw registers: the shunt voltage (0x01: two's complement, 2.5 uV per LSB, +-81.92 mV) and
the bus voltage (0x02: 1.25 mV per LSB, bit 15 always 0; no CNVR or OVF bits in it). As with
the INA219, power is the product of what the node gets and its current, not an assumed 5 V.

Datasheet figures (TI SBOS547A): shunt and bus conversion times of 140, 204, 332, 588, 1100,
2116, 4156 or 8244 us each, and 1..1024 results averaged. The firmware picks the configuration
per sample rate (`config_for_rate`, the same rule as firmware/core/h2_ina226.h): the longest
result that fits in 90 % of the sample period. Its calibration register (0x05) and current and
power registers are not used on the wire: `calibration_register` gives what the datasheet's
equation 1 would program, for reference and for the simavr part's tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from controller.config.channels import (
    i2c_address,
    is_i2c,
    is_ina226,
)
from controller.errors import ConfigError
from controller.meter.ina2xx import FloatArray, ShuntCalibration, SupplyModel, signed_v
from controller.meter.ina219 import Ina219Calibration, Ina219Model

SHUNT_LSB_V = 2.5e-6
BUS_LSB_V = 1.25e-3
SHUNT_RANGE_V = 32768 * SHUNT_LSB_V  # 81.92 mV
SHUNT_FULL_SCALE = 0x7FFF  # the shunt register's largest value; 0x8000 is its most negative
BUS_FAILED = 0xFFFF  # the firmware's mark for a chip that did not answer or is no INA226
ADDRESSES = (0x40, 0x41, 0x42, 0x43)
MANUFACTURER_ID = 0x5449  # register 0xFE: "TI"
DIE_ID = 0x2260  # register 0xFF
CONVERSION_US = (140, 204, 332, 588, 1100, 2116, 4156, 8244)
AVERAGES = (1, 4, 16, 64, 128, 256, 512, 1024)
CONFIG_BASE = 0x4007  # bits 14..12 read 100; mode 7: shunt and bus, continuous
PERIOD_SHARE = 0.9  # of the sample period a result may take: the chip's clock is good to ~10 %
# Input-referred noise of one shunt conversion, typical at the short conversion times the
# firmware uses (TI SBOS547A's noise figures: about a microvolt rms); averaging n results
# lowers it by sqrt(n), longer conversions lower it further.
INPUT_NOISE_UV = 1.0


@dataclass(frozen=True, slots=True)
class Ina226Config:
    """One configuration register value, decoded."""

    register: int

    @property
    def averages(self) -> int:
        return AVERAGES[self.register >> 9 & 7]

    @property
    def bus_conversion_us(self) -> int:
        return CONVERSION_US[self.register >> 6 & 7]

    @property
    def shunt_conversion_us(self) -> int:
        return CONVERSION_US[self.register >> 3 & 7]

    @property
    def result_s(self) -> float:
        """How long one result takes: both conversions, times the averages."""
        return (self.bus_conversion_us + self.shunt_conversion_us) * self.averages * 1e-6


def config_for_rate(rate_hz: int) -> Ina226Config | None:
    """The configuration the firmware writes at START for this sample rate (None: no
    configuration fits, the rate is too high for an INA226)."""
    budget_us = 900_000 // rate_hz  # PERIOD_SHARE of the period, as the firmware's integers
    best: tuple[int, int] | None = None
    for avg in range(8):
        for ct in range(8):
            us = 2 * CONVERSION_US[ct] * AVERAGES[avg]
            if us <= budget_us and (best is None or us > best[0]):
                best = (us, CONFIG_BASE | avg << 9 | ct << 6 | ct << 3)
    return None if best is None else Ina226Config(best[1])


# The fastest rate with a configuration (2 x 140 us in 90 % of the period); the firmware's I2C
# budget (4800 cycles per chip, PROTOCOL.md section 6) lowers it to 2560 Hz for one chip alone.
RATE_MAX_HZ = int(PERIOD_SHARE / (2 * CONVERSION_US[0] * 1e-6))


def shunt_v(registers: npt.ArrayLike) -> FloatArray:
    """Shunt-voltage register values (u16 as sent) -> volts."""
    return signed_v(registers, SHUNT_LSB_V)


def bus_v(registers: npt.ArrayLike) -> FloatArray:
    """Bus-voltage register values -> volts; NaN where the chip did not answer (or was not an
    INA226 at START: its values are the failure marks)."""
    raw = np.asarray(registers, dtype=np.uint16)
    volts = raw.astype(np.float64) * BUS_LSB_V
    return np.where(raw >= 0x8000, np.nan, volts)


@dataclass(frozen=True, slots=True)
class Ina226Calibration(ShuntCalibration):
    """One INA226: its shunt and the node-side figures that turn registers into power."""

    address: int = 0x40
    shunt_ohm: float = 0.1
    kind: ClassVar[str] = "ina226"  # the channel kind, as the config and the manifest name it
    shunt_lsb_v: ClassVar[float] = SHUNT_LSB_V
    bus_lsb_v: ClassVar[float] = BUS_LSB_V
    noise_basis: ClassVar[str] = (
        f"INA226 input noise {INPUT_NOISE_UV:g} uV rms a conversion (TI SBOS547A, typical), "
        "over sqrt(the firmware's averages), with the 2.5 uV LSB's quantisation"
    )

    def __post_init__(self) -> None:
        if self.address not in ADDRESSES:
            raise ConfigError(f"INA226 address {self.address:#04x}: expected 0x40..0x43")
        if not self.shunt_ohm > 0:
            raise ConfigError(f"INA226 shunt_ohm: {self.shunt_ohm} must be positive")

    @property
    def max_current_a(self) -> float:
        """The largest current the shunt range (+-81.92 mV) measures through this shunt."""
        return SHUNT_RANGE_V / self.shunt_ohm

    def calibration_register(self) -> int:
        """Datasheet equation 1: trunc(0.00512 / (Current_LSB x R_shunt)), 15 bits."""
        return int(0.00512 / (self.current_lsb_a() * self.shunt_ohm)) & 0x7FFF

    def bus_v(self, bus_registers: npt.ArrayLike) -> FloatArray:
        """The module's `bus_v`: this chip's bus register layout."""
        return bus_v(bus_registers)

    def saturated(
        self, shunt_registers: npt.ArrayLike, bus_registers: npt.ArrayLike
    ) -> npt.NDArray[np.bool_]:
        """A shunt register at +-81.92 mV (0x7FFF or 0x8000), where the chip's ADC stops: the
        OVF flag lives in register 0x06, which the firmware does not send."""
        raw = np.asarray(shunt_registers, dtype=np.uint16)
        at_limit = (raw == SHUNT_FULL_SCALE) | (raw == SHUNT_FULL_SCALE + 1)
        flagged: npt.NDArray[np.bool_] = at_limit & (np.asarray(bus_registers) != BUS_FAILED)
        return flagged

    def conversion_us(self, rate_hz: int) -> float | None:
        """How long one result takes in the firmware's configuration for this rate (None: no
        configuration fits)."""
        config = config_for_rate(rate_hz)
        return None if config is None else config.result_s * 1e6

    def noise_ua(self, rate_hz: int) -> float:
        """The rms current noise of one result: the input noise over the firmware's averages,
        with the register's quantisation (one LSB / sqrt(12)), through the shunt."""
        config = config_for_rate(rate_hz)
        input_uv = INPUT_NOISE_UV / math.sqrt(1 if config is None else config.averages)
        return math.hypot(input_uv, self.shunt_lsb_v * 1e6 / math.sqrt(12)) / self.shunt_ohm

    def facts(self, rate_hz: int) -> dict[str, int | float | None]:
        """What a run's manifest records of this chip: its shunt and the configuration the
        firmware wrote for the run's sample rate."""
        config = config_for_rate(rate_hz)
        return {
            "address": self.address,
            "shunt_ohm": self.shunt_ohm,
            "config_register": None if config is None else config.register,
            "averages": None if config is None else config.averages,
            "conversion_us": None if config is None else config.shunt_conversion_us,
            "result_s": None if config is None else config.result_s,
            "current_step_a": self.current_step_a,
        }


@dataclass(frozen=True, slots=True)
class Ina226Model(SupplyModel):
    """The chip in a node's supply, for the virtual meter: power in, registers out.

    The same supply as `ina219.Ina219Model` (`supply_v` behind `source_ohm`, then the shunt;
    the node draws `power` at the bus voltage it gets). The registers are rounded to the LSB,
    the shunt clipped at +-81.92 mV, after Gaussian input noise (`noise_uv`, `INPUT_NOISE_UV`
    by default)."""

    calibration: Ina226Calibration = Ina226Calibration()
    supply_v: float = 5.1
    source_ohm: float = 0.05
    noise_uv: float = INPUT_NOISE_UV

    def registers(
        self, power_mw: npt.ArrayLike, rng: np.random.Generator
    ) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
        """(shunt, bus) register values for an array of true powers (any shape)."""
        current = self.current_a(power_mw)
        shunt = current * self.calibration.shunt_ohm
        shunt = shunt + rng.normal(0.0, self.noise_uv * 1e-6, shunt.shape)
        counts = np.clip(np.rint(shunt / SHUNT_LSB_V), -32768, 32767).astype(np.int16)
        bus = np.clip(np.rint(self.bus_v(power_mw) / BUS_LSB_V), 0, 0x7FFF).astype(np.uint16)
        return counts.view(np.uint16), bus


def model_like(ina219: Ina219Model) -> Ina226Model:
    """An INA226 in the same supply, through the same shunt, as an INA219 model: the modelled
    meters' default, so a config's meter.shunt_ohm reaches either chip."""
    return Ina226Model(
        Ina226Calibration(shunt_ohm=ina219.calibration.shunt_ohm),
        supply_v=ina219.supply_v,
        source_ohm=ina219.source_ohm,
    )


def i2c_calibration(channel: int, shunt_ohm: float) -> Ina219Calibration | Ina226Calibration:
    """The calibration of a config's I2C channel ("INA219@0x4n" or "INA226@0x4n", as
    `controller.config.model` numbers them), through the config's shunt."""
    if not is_i2c(channel):
        raise ConfigError(f"meter channel {channel} is an analog input, not an I2C monitor")
    if is_ina226(channel):
        return Ina226Calibration(i2c_address(channel), shunt_ohm)
    return Ina219Calibration(i2c_address(channel), shunt_ohm)
