"""Checks the INA219 and INA226 channel-kind tests share."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from controller.errors import ConfigError
from controller.meter.ina219 import Ina219Calibration, Ina219Model
from controller.meter.ina226 import Ina226Calibration, Ina226Model

Registers = npt.NDArray[np.uint16]


def assert_refused(
    calibration: type[Ina219Calibration | Ina226Calibration],
    changes: dict[str, float],
    message: str,
) -> None:
    """A calibration with these changes is refused with a ConfigError naming `message`."""
    with pytest.raises(ConfigError, match=message):
        calibration(**changes)  # type: ignore[arg-type]


def assert_registers_decode_within_a_step(
    model: Ina219Model | Ina226Model,
) -> tuple[Registers, Registers]:
    """The model's registers for a sleeping microcontroller up to a Pi 3B at 4 W decode back to
    the power within a step of the registers; returns them (shunt, bus)."""
    power = np.array([20.0, 1000.0, 2500.0, 4000.0])
    shunt, bus = model.registers(power, np.random.default_rng(1))
    measured = model.calibration.power_mw(shunt, bus)
    for p, m in zip(power, measured, strict=True):
        assert abs(m - p) <= model.calibration.power_step_mw(p, model.supply_v)
    return shunt, bus
