"""What the INA219 and INA226 channel kinds share: a signed shunt register -> volts, the
calibration arithmetic that turns a chip's two registers into current and power through its
shunt, and the node supply a chip model sits in (`controller.meter.ina219`,
`controller.meter.ina226` give each chip's LSBs, ranges and bus register layout)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def signed_v(registers: npt.ArrayLike, lsb_v: float) -> FloatArray:
    """Two's-complement register values (u16 as sent) at `lsb_v` volts per LSB -> volts."""
    raw = np.asarray(registers, dtype=np.uint16).view(np.int16)
    return raw.astype(np.float64) * lsb_v


class ShuntCalibration:
    """The arithmetic of a current monitor through its shunt, for a frozen dataclass that has
    `shunt_ohm`, sets the chip's LSBs and gives its range (`max_current_a`) and its bus
    register's decoding (`bus_v`)."""

    __slots__ = ()
    shunt_ohm: float
    shunt_lsb_v: ClassVar[float]
    bus_lsb_v: ClassVar[float]

    @property
    def max_current_a(self) -> float:
        raise NotImplementedError

    def bus_v(self, bus_registers: npt.ArrayLike) -> FloatArray:
        raise NotImplementedError

    def saturated(
        self, shunt_registers: npt.ArrayLike, bus_registers: npt.ArrayLike
    ) -> npt.NDArray[np.bool_]:
        """Per sample: the shunt voltage was outside the chip's range, so the current read is
        clipped (False where the chip did not answer: that sample is missing, not clipped)."""
        raise NotImplementedError

    @property
    def current_step_a(self) -> float:
        """One LSB of the shunt register, in amps: the current resolution."""
        return self.shunt_lsb_v / self.shunt_ohm

    def current_lsb_a(self) -> float:
        """The datasheet's Current_LSB for the full shunt range (max current / 2**15)."""
        return self.max_current_a / 2**15

    def current_a(self, shunt_registers: npt.ArrayLike) -> FloatArray:
        return signed_v(shunt_registers, self.shunt_lsb_v) / self.shunt_ohm

    def power_mw(self, shunt_registers: npt.ArrayLike, bus_registers: npt.ArrayLike) -> FloatArray:
        """V x I per sample, in mW; NaN where the chip did not answer."""
        return self.bus_v(bus_registers) * self.current_a(shunt_registers) * 1000.0

    def power_step_mw(self, power_mw: float, supply_v: float = 5.0) -> float:
        """The power change one LSB of either register makes near `power_mw`."""
        current = power_mw / 1000.0 / supply_v
        return (supply_v * self.current_step_a + current * self.bus_lsb_v) * 1000.0


class SupplyModel:
    """A chip in a node's supply, for a frozen dataclass with these fields: the supply gives
    `supply_v` with `source_ohm` of cable and connector in series, then the shunt; the node
    draws `power` at the bus voltage it gets, so the current solves
    P = (V - (R_source + R_shunt) I) I."""

    __slots__ = ()
    calibration: ShuntCalibration
    supply_v: float
    source_ohm: float

    def current_a(self, power_mw: npt.ArrayLike) -> FloatArray:
        p = np.asarray(power_mw, dtype=np.float64) / 1000.0
        r = self.source_ohm + self.calibration.shunt_ohm
        disc = np.maximum(self.supply_v**2 - 4.0 * r * p, 0.0)
        result: FloatArray = (self.supply_v - np.sqrt(disc)) / (2.0 * r)
        return result

    def bus_v(self, power_mw: npt.ArrayLike) -> FloatArray:
        current = self.current_a(power_mw)
        result: FloatArray = (
            self.supply_v - (self.source_ohm + self.calibration.shunt_ohm) * current
        )
        return result
