"""meter.source = "ppk2": its keys are checked at load, each error one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config.load import load_config
from controller.errors import ConfigError

LOCAL = Path(__file__).resolve().parents[2] / "configs" / "local.toml"
PPK2 = 'meter.source="ppk2"'


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["meter.rate_hz=6400"], "meter.rate_hz: 6400 Hz does not divide the PPK2's 100000"),
        (['meter.mode="source"'], 'meter.supply_mv: required when meter.mode is "source"'),
        (['meter.marker_input="D8"'], 'meter.marker_input: expected a logic input "D0".."D7"'),
        (["meter.supply_mv=5500"], "meter.supply_mv: 5500 is outside 800..5000"),
        (['meter.channels.server="A1"'], "meter.channels.server: a PPK2 measures one supply"),
        (['meter.mode="both"'], "meter.mode: expected one of"),
    ],
)
def test_a_bad_ppk2_key_is_named_in_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(LOCAL, [PPK2, *overrides])
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_valid_ppk2_config_loads_with_its_keys() -> None:
    config = load_config(LOCAL, [PPK2, 'meter.mode="source"', "meter.supply_mv=3300"])
    meter = config.meter
    assert (meter.source, meter.mode, meter.supply_mv, meter.marker_input) == (
        "ppk2",
        "source",
        3300,
        0,
    )
    assert meter.modelled  # no port: the emulated PPK2, driven by the power model
    on_a_port = load_config(LOCAL, [PPK2, 'meter.port="/dev/ttyACM0"', 'meter.marker_input="D3"'])
    assert not on_a_port.meter.modelled and on_a_port.meter.marker_input == 3
