"""The INA226 channel kind: register decoding, the configuration the firmware picks per sample
rate (the same rule as firmware/core/h2_ina226.h, whose C tests pin the same values), the
calibration figures from the datasheet, and the virtual meter's model of the chip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from controller.config.channels import (
    INA226_RATE_MAX_HZ,
)
from controller.meter.ina219 import Ina219Calibration, Ina219Model
from controller.meter.ina226 import (
    RATE_MAX_HZ,
    Ina226Calibration,
    Ina226Config,
    Ina226Model,
    bus_v,
    config_for_rate,
    model_like,
    shunt_v,
)
from tests.meter._ina_checks import assert_refused, assert_registers_decode_within_a_step

VECTORS = Path(__file__).resolve().parents[2] / "firmware" / "vectors" / "frames.json"


def test_golden_ina226_samples_decode_beside_an_ina219s() -> None:
    """firmware/vectors/frames.json's INA226 frame, which the C tests build with the core."""
    (vector,) = [
        v for v in json.loads(VECTORS.read_text()) if v["name"] == "samples_ina226_and_ina219"
    ]
    samples = np.array(vector["fields"]["samples"], dtype=np.uint16)
    ina226 = Ina226Calibration(0x40, shunt_ohm=0.1).power_mw(samples[:, 0], samples[:, 1])
    ina219 = Ina219Calibration(0x41, shunt_ohm=0.1).power_mw(samples[:, 2], samples[:, 3])
    assert ina226[:3] == pytest.approx([3000.0, 6.12, -0.125])
    assert ina219[:3] == pytest.approx([3000.0, 6.12, -0.5])  # the same loads, 4x coarser
    assert ina226[3] == pytest.approx(0.0819175 / 0.1 * 40.95875 * 1000)
    assert np.isnan(ina226[4]) and np.isnan(ina219[4])


def test_registers_decode_to_volts_amps_and_watts() -> None:
    shunt = np.array([24000, 0x0001, 0xFFFF, 0x8000, 0x0000], dtype=np.uint16)
    bus = np.array([4000, 4080, 4000, 0x7FFF, 0xFFFF], dtype=np.uint16)
    assert shunt_v(shunt) == pytest.approx([0.06, 2.5e-6, -2.5e-6, -0.08192, 0.0])
    assert bus_v(bus[:4]) == pytest.approx([5.0, 5.1, 5.0, 40.95875])
    assert np.isnan(bus_v(bus)[4])  # the failure mark: bit 15 is never set in a reading
    cal = Ina226Calibration(0x40, shunt_ohm=0.1)
    power = cal.power_mw(shunt, bus)
    assert power[:3] == pytest.approx([3000.0, 0.1275, -0.125])
    assert np.isnan(power[4])


@pytest.mark.parametrize(
    ("rate_hz", "register", "result_us"),
    [
        (1000, 0x4097, 664),  # 2 x 332 us
        (800, 0x4207, 1120),  # 4 x 2 x 140 us
        (500, 0x424F, 1632),  # 4 x 2 x 204 us
        (100, 0x4327, 8800),  # 4 x 2 x 1100 us
        (3200, 0x4007, 280),  # the fastest: 2 x 140 us
    ],
)
def test_the_configuration_for_a_rate_is_the_firmwares(
    rate_hz: int, register: int, result_us: int
) -> None:
    config = config_for_rate(rate_hz)
    assert config is not None and config.register == register
    assert config.result_s == pytest.approx(result_us * 1e-6)
    assert config.result_s <= 0.9 / rate_hz  # a fresh result in every sample


def test_rates_beyond_the_fastest_conversion_have_no_configuration() -> None:
    assert config_for_rate(4000) is None and config_for_rate(RATE_MAX_HZ) is not None
    assert config_for_rate(RATE_MAX_HZ + 1) is None
    assert INA226_RATE_MAX_HZ == RATE_MAX_HZ  # the config's copy (no numpy on SSH nodes)
    power_on = Ina226Config(0x4127)
    assert (power_on.averages, power_on.shunt_conversion_us, power_on.bus_conversion_us) == (
        1,
        1100,
        1100,
    )


def test_datasheet_calibration_and_resolution() -> None:
    cal = Ina226Calibration(shunt_ohm=0.1)
    assert cal.max_current_a == pytest.approx(0.8192)
    assert cal.current_step_a == pytest.approx(25e-6)
    assert cal.calibration_register() == 2048  # 0.00512 / (25 uA x 0.1 ohm)
    # the firmware/README.md table: a Pi 3B at 1 and 4 W, a microcontroller at 20 mW
    assert cal.power_step_mw(1000.0) == pytest.approx(0.375)
    assert cal.power_step_mw(4000.0) == pytest.approx(1.125)
    assert cal.power_step_mw(20.0) == pytest.approx(0.13)
    # four times finer than the INA219's 10 uV in current, 3.2 times in bus voltage
    ina219 = Ina219Calibration(shunt_ohm=0.1)
    assert ina219.power_step_mw(1000.0) / cal.power_step_mw(1000.0) > 3.4
    assert (Ina226Calibration.kind, Ina219Calibration.kind) == ("ina226", "ina219")


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"address": 0x44}, "INA226 address 0x44"), ({"shunt_ohm": 0.0}, "shunt_ohm")],
)
def test_bad_calibration_is_refused_naming_the_key(changes: dict[str, float], message: str) -> None:
    assert_refused(Ina226Calibration, changes, message)


def test_model_registers_decode_back_to_the_power_within_a_step() -> None:
    model = Ina226Model(noise_uv=0.0)
    _, bus = assert_registers_decode_within_a_step(model)
    assert (bus < 0x8000).all()
    assert bus_v(bus)[-1] < 5.1 - 0.1  # the supply droops under 4 W
    # beyond +-81.92 mV: clipped at full scale
    shunt, _ = model.registers(np.array([30_000.0]), np.random.default_rng(1))
    assert shunt_v(shunt)[0] == pytest.approx(0.08192 - 2.5e-6)


def test_the_modelled_meters_default_follows_the_ina219_models_supply_and_shunt() -> None:
    ina219 = Ina219Model(Ina219Calibration(shunt_ohm=0.5), supply_v=5.2, source_ohm=0.02)
    model = model_like(ina219)
    assert (model.calibration.shunt_ohm, model.supply_v, model.source_ohm) == (0.5, 5.2, 0.02)
    assert model.bus_v(1000.0) == pytest.approx(ina219.bus_v(1000.0))
