"""The INA219 channel kind: register decoding (against the golden vectors), calibration figures
from the datasheet, and the virtual meter's model of the chip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from controller.meter.ina219 import (
    Ina219Calibration,
    Ina219Model,
    bus_v,
    overflow,
    shunt_v,
)
from tests.meter._ina_checks import assert_refused, assert_registers_decode_within_a_step

VECTORS = Path(__file__).resolve().parents[2] / "firmware" / "vectors" / "frames.json"


def vector(name: str) -> dict[str, object]:
    found: dict[str, object] = next(v for v in json.loads(VECTORS.read_text()) if v["name"] == name)
    return found


def test_golden_ina219_samples_decode_to_volts_amps_and_watts() -> None:
    fields = vector("samples_adc_and_ina219")["fields"]
    assert isinstance(fields, dict)
    samples = np.array(fields["samples"], dtype=np.uint16)
    cal = Ina219Calibration(0x40, shunt_ohm=0.1)
    assert bus_v(samples[:2, 2]) == pytest.approx([5.0, 5.1])
    assert cal.current_a(samples[:, 1]) == pytest.approx([0.6, 0.012, -0.0001, 0.0])
    power = cal.power_mw(samples[:, 1], samples[:, 2])
    assert power[:3] == pytest.approx([3000.0, 61.2, -0.5])
    assert np.isnan(power[3])  # the INA219 that did not answer
    extremes = np.array(vector("samples_two_ina219_extremes")["fields"]["samples"])  # type: ignore[index]
    assert shunt_v(extremes[0, [0, 2]]) == pytest.approx([0.32767, -0.32768])
    assert bus_v(extremes[0, [1]]) == pytest.approx([16.0])
    assert overflow(extremes[0, [1, 3]]).tolist() == [True, False]


def test_datasheet_calibration_and_resolution() -> None:
    cal = Ina219Calibration(shunt_ohm=0.1, pga=8)
    assert cal.max_current_a == pytest.approx(3.2)
    assert cal.current_step_a == pytest.approx(1e-4)
    assert cal.calibration_register() == 4194  # 0.04096 / (3.2 A / 2**15 x 0.1 ohm)
    # a Pi 3B at 1 and 4 W; a microcontroller at 20 mW (0.1 ohm, and 1 ohm at PGA /1)
    assert cal.power_step_mw(1000.0) == pytest.approx(1.3)
    assert cal.power_step_mw(4000.0) == pytest.approx(3.7)
    assert cal.power_step_mw(20.0) == pytest.approx(0.516)
    fine = Ina219Calibration(shunt_ohm=1.0, pga=1)
    assert fine.max_current_a == pytest.approx(0.04)
    assert fine.power_step_mw(20.0) == pytest.approx(0.066)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"address": 0x44}, "address 0x44"),
        ({"shunt_ohm": 0.0}, "shunt_ohm"),
        ({"pga": 3}, "pga: 3"),
    ],
)
def test_bad_calibration_is_refused_naming_the_key(changes: dict[str, float], message: str) -> None:
    assert_refused(Ina219Calibration, changes, message)


def test_model_registers_decode_back_to_the_power_within_a_step() -> None:
    model = Ina219Model(noise_uv=0.0)
    _, bus = assert_registers_decode_within_a_step(model)
    assert (bus & 2).all() and not overflow(bus).any()
    assert bus_v(bus)[-1] < 5.1 - 0.1  # the supply droops under 4 W
    # beyond the PGA range: clipped and flagged
    shunt, bus = model.registers(np.array([30_000.0]), np.random.default_rng(1))
    assert overflow(bus).all() and shunt_v(shunt)[0] == pytest.approx(0.32)
