"""`h2iot rig check`'s meter facts (controller.rig.meter_facts): a line each for what the
configured meter can see, and a warning when the client's expected peak nears the full scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config.load import load_config
from controller.config.model import Config
from controller.rig import meter_facts


def _config(*overrides: str) -> Config:
    return load_config(None, overrides)


# A Pi 3B+ at 400 % CPU draws 980 mA (Pidramble's power benchmarks).
PI3B_PLUS = "nodes.client.device={peak_current_ma = 980}"


@pytest.mark.parametrize(("shunt_ohm", "status"), [(0.1, "warn"), (0.02, "pass")])
def test_an_ina226_warns_when_a_pi_3b_plus_nears_its_shunt_range(
    shunt_ohm: float, status: str
) -> None:
    config = _config(
        'meter.channels.client="INA226@0x40"', f"meter.shunt_ohm={shunt_ohm}", PI3B_PLUS
    )
    found = meter_facts.idle_checks(config, "client", "INA226@0x40", mean_mw=1900, sd_mw=20)
    assert [c.name for c in found] == ["idle power client", "meter headroom client"]
    headroom = found[1]
    assert headroom.status == status
    # 980 mA against 0.8192 A (120 %) on 0.1 ohm, 4.096 A (24 %) on 0.02 ohm
    share = "120%" if shunt_ohm == 0.1 else "24%"
    assert f"expected peak 980 mA (the custom profile's peak) is {share}" in headroom.detail


def test_without_a_profile_peak_the_idle_power_times_the_busy_factor_is_the_peak() -> None:
    config = _config('meter.channels.client="INA226@0x40"', "meter.shunt_ohm=0.1")
    # 2.5 W idle x 1.6 at 5 V = 800 mA: 98 % of 0.8192 A
    high = meter_facts.idle_checks(config, "client", "I", mean_mw=2500, sd_mw=1)[1]
    assert high.status == "warn" and "2500 mW idle x 1.6 at 5 V" in high.detail
    low = meter_facts.idle_checks(config, "client", "I", mean_mw=1200, sd_mw=1)[1]
    assert low.status == "pass"  # 384 mA: 47 %
    # The server's channel is not the one the facts describe: no headroom line for it.
    assert len(meter_facts.idle_checks(config, "server", "I", mean_mw=2500, sd_mw=1)) == 1


def test_the_rpi3b_profile_names_its_peak() -> None:
    config = _config('nodes.client.device="rpi3b"')
    headroom = meter_facts.idle_checks(config, "client", "A0", mean_mw=1200, sd_mw=1)[1]
    # 730 mA of the ACS712-5A's 5 A
    assert (
        headroom.status == "pass" and "730 mA (the rpi3b profile's peak) is 15%" in headroom.detail
    )


def test_the_facts_print_a_line_each() -> None:
    lines = [c.line() for c in meter_facts.config_checks(_config())]
    assert len(lines) == 3
    assert lines[0].startswith("PASS") and "meter step" in lines[0] and "26.39 mA" in lines[0]
    assert "voltage assumed" in lines[0]
    assert "18.92 mA rms a sample" in lines[1] and "Allegro ACS712 datasheet" in lines[1]
    assert "full scale 5 A; 1000 samples/s, conversion 104 us, bandwidth 80 kHz" in lines[2]


def test_a_calibration_that_does_not_load_fails_its_line(tmp_path: Path) -> None:
    config = _config(f'meter.calibration="{tmp_path / "missing.json"}"')
    [check] = meter_facts.config_checks(config)
    assert check.status == "fail" and check.name == "meter facts"
