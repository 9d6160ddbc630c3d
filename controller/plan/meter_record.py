"""What the config's meter resolves, before it is opened: its `meter.resolution` record (the
keys of `controller.meter.resolution.Resolution.to_dict`), as its declaration's `facts` states
it from the config alone, which is what the sweep's tap writes into the run's manifest (a real
PPK2's own calibration being close to the emulator's the facts use)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.config import Config
from controller.errors import ConfigError

__all__ = ["config_meter_record"]


def config_meter_record(config: Config) -> Mapping[str, Any]:
    """The config's meter's `meter.resolution` record; ConfigError for a source that states
    none."""
    meter = config.meter
    if meter.spec.facts is None:
        raise ConfigError(
            f"meter.source = {meter.source!r}: states no resolution, so a plan has no meter floor"
        )
    record: Mapping[str, Any] = meter.spec.load(meter.spec.facts)(meter).to_dict()
    return record
