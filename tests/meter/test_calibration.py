"""Calibration record, code -> current -> power, and the sensor model it inverts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from controller.errors import ConfigError
from controller.meter.calibration import Calibration, ChannelCalibration, nominal
from controller.meter.sensor import Acs712


def test_round_trip_through_a_file(tmp_path):
    cal = nominal((0, 1), "20A", 5.1).with_channel(
        ChannelCalibration(1, "30A", 66.0, 510.25, 5.0, 5000, 0.7)
    )
    path = tmp_path / "cal.json"
    cal.save(path)
    assert Calibration.load(path) == cal
    assert cal.to_dict()["format"] == "h2iot-meter-calibration"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("channels"), "cal.json: channels: missing"),
        (lambda d: d["channels"][0].pop("zero_code"), "cal.json: channels[0].zero_code: missing"),
        (
            lambda d: d["channels"][1].update(variant="10A"),
            "cal.json: channels[1].variant: '10A' is not 5A, 20A or 30A",
        ),
        (
            lambda d: d["channels"][0].update(supply_v="5"),
            "cal.json: channels[0].supply_v: expected float, got '5'",
        ),
        (lambda d: d.update(version=2), "cal.json: version: 2, expected 1"),
        (lambda d: d.update(adc_bits=True), "cal.json: adc_bits: expected int, got True"),
        (
            lambda d: d["channels"][1].update(analog_input=0),
            "cal.json: channels: analog input listed twice",
        ),
    ],
)
def test_malformed_file_names_file_and_key(tmp_path, edit, message):
    record = nominal().to_dict()
    edit(record)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(record))
    with pytest.raises(ConfigError) as caught:
        Calibration.load(path)
    assert str(caught.value) == f"{tmp_path}/{message}"


def test_not_json_and_missing_file(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text("{")
    with pytest.raises(ConfigError, match=r"cal.json: not JSON"):
        Calibration.load(path)
    with pytest.raises(ConfigError, match=r"nope.json: cannot read"):
        Calibration.load(tmp_path / "nope.json")


def test_conversion_by_variant():
    for variant, sensitivity in (("5A", 185.0), ("20A", 100.0), ("30A", 66.0)):
        cal = nominal((0,), variant, 5.0)
        # 100 codes above zero = 100 x 5000/1024 mV
        current = cal.current_ma(cal.channel(0).zero_code + 100, 0)
        assert current == pytest.approx(100 * 5000 / 1024 / sensitivity * 1000)
        assert cal.power_mw(cal.channel(0).zero_code + 100, 0) == pytest.approx(current * 5.0)


@pytest.mark.parametrize("variant", ["5A", "20A", "30A"])
@pytest.mark.parametrize("power_mw", [0.0, 1200.0, 3950.0])
def test_nominal_calibration_inverts_the_sensor_without_bias(variant, power_mw):
    """Noise dithers the floor quantisation: the mean of many samples is unbiased."""
    sensor = Acs712(variant=variant)
    codes = sensor.codes(np.full(200_000, power_mw), np.random.default_rng(3))
    measured = nominal((0,), variant).power_mw(codes, 0).mean()
    lsb_mw = 5000 / 1024 / sensor_sensitivity(variant) * 5000
    assert measured == pytest.approx(power_mw, abs=0.02 * lsb_mw)


def sensor_sensitivity(variant: str) -> float:
    return {"5A": 185.0, "20A": 100.0, "30A": 66.0}[variant]


def test_oversampling_rounds_the_mean_of_reads():
    sensor = Acs712(noise_mv=0.0, adc_noise_lsb=0.0)
    one = sensor.codes(np.array([1000.0]), np.random.default_rng(0), 1)
    four = sensor.codes(np.array([1000.0]), np.random.default_rng(0), 4)
    assert one.tolist() == four.tolist()
