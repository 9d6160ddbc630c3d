"""What the config's meter resolves, before it is opened: its `meter.resolution` record (the
keys of `controller.meter.resolution.Resolution.to_dict`), as the sweep's tap would write it
into the run's manifest.

For now this builds the record the way each tap does, from the config alone (the board's
nominal or recorded calibration; a PPK2's emulator calibration, a real unit's own being close
to it). Once the meter sources declare their facts (`MeterSourceSpec.facts`, a
`(MeterConfig) -> Resolution`), `config_meter_record` becomes their one call and the table
below goes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.registry import load_dotted
from controller.config import Config
from controller.config.channels import is_i2c
from controller.config.model import MeterConfig
from controller.errors import ConfigError
from controller.meter.calibration import Calibration, nominal
from controller.meter.ina226 import i2c_calibration
from controller.meter.ppk2.device import EXAMPLE_METADATA
from controller.meter.resolution import Resolution

__all__ = ["config_meter_record"]

# The sources' own figures, loaded by name as the registry loads a source's tap: the meter
# sources sit above the CLI (their `h2iot meter` verbs use its help), and the CLI imports this.
_BOARD_STEP = "controller.meter_sources.board.resolution:tap_resolution"
_PPK2_STEPS = "controller.meter_sources.ppk2.resolution:ppk2_resolution"


def _board(meter: MeterConfig) -> Resolution:
    client = meter.channel_of("client")
    if client is None:
        raise ConfigError("meter.channels: the client node must be metered (client = A0, ...)")
    inputs = tuple(sorted(c for _role, c in meter.channels if not is_i2c(c)))
    calibration = (
        Calibration.load(meter.calibration)
        if meter.calibration is not None
        else nominal(inputs or (0,), meter.sensor, meter.supply_v)
    )
    chip = i2c_calibration(client, meter.shunt_ohm) if is_i2c(client) else None
    resolution: Resolution = load_dotted(_BOARD_STEP)(calibration, client, chip)
    return resolution


def _ppk2(meter: MeterConfig) -> Resolution:
    resolution: Resolution = load_dotted(_PPK2_STEPS)(EXAMPLE_METADATA, meter.power_v)
    return resolution


# A source's tap (its spec's `tap`): the record that tap writes. Keyed by the tap rather than
# the source's name, so the three board sources share one entry.
_BY_TAP: Mapping[str, Callable[[MeterConfig], Resolution]] = {
    "controller.meter_sources.board.tap:open_board_tap": _board,
    "controller.meter_sources.ppk2.tap:open_ppk2_tap": _ppk2,
}


def config_meter_record(config: Config) -> Mapping[str, Any]:
    """The config's meter's `meter.resolution` record; ConfigError for a source that states
    none."""
    meter = config.meter
    build = _BY_TAP.get(meter.spec.tap)
    if build is None:
        raise ConfigError(
            f"meter.source = {meter.source!r}: states no resolution, so a plan has no meter floor"
        )
    return build(meter).to_dict()
