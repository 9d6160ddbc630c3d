"""The INA219 channel kind (protocol 2): its registers on the wire -> volts, amps, watts; its
calibration; and a model of the chip for the virtual meter.

A sample of an INA219 channel is two raw registers (firmware/PROTOCOL.md, section 3): the
shunt voltage (0x01: two's complement, 10 uV per LSB at every PGA setting) and the bus
voltage (0x02: bits 15..3 at 4 mV per LSB, bit 1 CNVR, bit 0 OVF). The chip sits high-side in
the node's 5 V supply: the bus voltage is what the node gets (after the cable's and the
shunt's drop), the shunt voltage over the shunt resistance is its current, and power is
their product, measured rather than assumed at 5 V.

Datasheet figures (TI SBOS448G): PGA /1../8 = +-40, 80, 160, 320 mV of shunt; 12-bit shunt and
bus conversions take 532 us each, so in the firmware's mode (shunt then bus, continuous) a
new pair comes every 1064 us. Its calibration register (0x05) and current/power registers
(0x04/0x03) are not used on the wire: `calibration_register` gives the value the datasheet's
equation 1 would program, for reference and for the simavr part's tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from controller.errors import ConfigError
from controller.meter.ina2xx import FloatArray, ShuntCalibration, SupplyModel, signed_v

SHUNT_LSB_V = 10e-6
BUS_LSB_V = 4e-3
BUS_FAILED = 0xFFFF  # the firmware's mark for an INA219 that did not answer
PGA_RANGE_MV: Mapping[int, float] = {1: 40.0, 2: 80.0, 4: 160.0, 8: 320.0}
FIRMWARE_PGA = 8  # the firmware's configuration 0x199F: PGA /8, 16 V bus range, 12-bit
CONVERSION_S = 2 * 532e-6
ADDRESSES = (0x40, 0x41, 0x42, 0x43)


def shunt_v(registers: npt.ArrayLike) -> FloatArray:
    """Shunt-voltage register values (u16 as sent) -> volts."""
    return signed_v(registers, SHUNT_LSB_V)


def bus_v(registers: npt.ArrayLike) -> FloatArray:
    """Bus-voltage register values -> volts; NaN where the INA219 did not answer."""
    raw = np.asarray(registers, dtype=np.uint16)
    volts = (raw >> 3).astype(np.float64) * BUS_LSB_V
    return np.where(raw == BUS_FAILED, np.nan, volts)


def overflow(registers: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """The OVF bit: the shunt voltage was outside the PGA range (the current is clipped)."""
    raw = np.asarray(registers, dtype=np.uint16)
    flagged: npt.NDArray[np.bool_] = ((raw & 1) == 1) & (raw != BUS_FAILED)
    return flagged


@dataclass(frozen=True, slots=True)
class Ina219Calibration(ShuntCalibration):
    """One INA219: its shunt and the node-side figures that turn registers into power."""

    address: int = 0x40
    shunt_ohm: float = 0.1
    pga: int = FIRMWARE_PGA
    kind: ClassVar[str] = "ina219"  # the channel kind, as the config and the manifest name it
    shunt_lsb_v: ClassVar[float] = SHUNT_LSB_V
    bus_lsb_v: ClassVar[float] = BUS_LSB_V
    noise_basis: ClassVar[str] = (
        "INA219 10 uV LSB's quantisation (LSB / sqrt(12)); TI SBOS448G states no input noise, "
        "so this is a lower bound"
    )

    def __post_init__(self) -> None:
        if self.address not in ADDRESSES:
            raise ConfigError(f"INA219 address {self.address:#04x}: expected 0x40..0x43")
        if not self.shunt_ohm > 0:
            raise ConfigError(f"INA219 shunt_ohm: {self.shunt_ohm} must be positive")
        if self.pga not in PGA_RANGE_MV:
            raise ConfigError(f"INA219 pga: {self.pga} is not 1, 2, 4 or 8")

    @property
    def max_current_a(self) -> float:
        """The largest current the PGA range measures through this shunt."""
        return PGA_RANGE_MV[self.pga] / 1000.0 / self.shunt_ohm

    def conversion_us(self, rate_hz: int) -> float:
        """How long a new shunt and bus pair takes in the firmware's configuration (whatever
        the rate)."""
        del rate_hz
        return CONVERSION_S * 1e6

    def noise_ua(self, rate_hz: int) -> float:
        """The rms current noise of one reading: the 10 uV LSB's quantisation (LSB /
        sqrt(12)) through the shunt, the datasheet giving no input noise (a lower bound)."""
        del rate_hz
        return self.current_step_a * 1e6 / math.sqrt(12)

    def calibration_register(self) -> int:
        """Datasheet equation 1: trunc(0.04096 / (Current_LSB x R_shunt)), bit 0 clear."""
        return int(0.04096 / (self.current_lsb_a() * self.shunt_ohm)) & 0xFFFE

    def bus_v(self, bus_registers: npt.ArrayLike) -> FloatArray:
        """The module's `bus_v`: this chip's bus register layout."""
        return bus_v(bus_registers)

    def saturated(
        self, shunt_registers: npt.ArrayLike, bus_registers: npt.ArrayLike
    ) -> npt.NDArray[np.bool_]:
        """The OVF bit, or a shunt register at the PGA's full scale. The register is checked as
        well because the datasheet ties OVF to the current and power calculations being out
        of range, and the firmware leaves those uncalibrated; the register stops at the range
        whatever the calibration."""
        limit = round(PGA_RANGE_MV[self.pga] / 1000.0 / SHUNT_LSB_V)
        counts = np.asarray(shunt_registers, dtype=np.uint16).view(np.int16).astype(np.int32)
        at_limit = (np.abs(counts) >= limit) & (np.asarray(bus_registers) != BUS_FAILED)
        flagged: npt.NDArray[np.bool_] = overflow(bus_registers) | at_limit
        return flagged

    def facts(self, rate_hz: int) -> dict[str, int | float]:
        """What a run's manifest records of this chip (the rate does not change an INA219's
        configuration)."""
        del rate_hz
        return {"address": self.address, "shunt_ohm": self.shunt_ohm, "pga": self.pga}


@dataclass(frozen=True, slots=True)
class Ina219Model(SupplyModel):
    """The chip in a node's supply, for the virtual meter: power in, registers out.

    The supply gives `supply_v` with `source_ohm` of cable and connector in series, then the
    shunt; the node draws `power` at the bus voltage it gets, so the current solves
    P = (V - (R_source + R_shunt) I) I. The registers are quantised as the chip's (rounded to
    the LSB, the shunt clipped at the PGA range with OVF set), with Gaussian input noise
    (`noise_uv`, the datasheet's typical shunt offset scale) before quantisation.
    """

    calibration: Ina219Calibration = Ina219Calibration()
    supply_v: float = 5.1
    source_ohm: float = 0.05
    noise_uv: float = 5.0

    def registers(
        self, power_mw: npt.ArrayLike, rng: np.random.Generator
    ) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
        """(shunt, bus) register values for an array of true powers (any shape)."""
        current = self.current_a(power_mw)
        shunt_uv = current * self.calibration.shunt_ohm * 1e6
        shunt_uv = shunt_uv + rng.normal(0.0, self.noise_uv, shunt_uv.shape)
        limit = PGA_RANGE_MV[self.calibration.pga] * 100.0  # in 10 uV counts
        counts = np.rint(shunt_uv / 10.0)
        ovf = np.abs(counts) > limit
        shunt = np.clip(counts, -limit, limit).astype(np.int16).view(np.uint16)
        bus_counts = np.clip(np.rint(self.bus_v(power_mw) / BUS_LSB_V), 0, 0x1FFF).astype(np.uint16)
        bus = (bus_counts << 3) | 2 | ovf.astype(np.uint16)
        return shunt, bus.astype(np.uint16)
