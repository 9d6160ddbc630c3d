"""What a config must say for a PPK2 (the spec's `config_check`), refused at load naming the
key: it measures one supply, the client's, at 100 kS/s averaged to meter.rate_hz. Light, as the
config is: imported only when a config names this source."""

from __future__ import annotations

from controller.config.layers import Stack
from controller.config.model import PPK2_RATE_HZ, MeterConfig
from controller.errors import ConfigError


def check(stack: Stack, meter: MeterConfig) -> None:
    later = max(stack.origin("meter.source"), stack.origin("meter.rate_hz"), key=stack.layers.index)
    if PPK2_RATE_HZ % meter.rate_hz:
        raise ConfigError(
            f"{later}: meter.rate_hz: {meter.rate_hz} Hz does not divide the PPK2's "
            f'{PPK2_RATE_HZ} samples/s (meter.source = "{meter.source}"), e.g. 1000 or 10000'
        )
    roles = [role for role, _c in meter.channels]
    if roles != ["client"]:
        key = "meter.channels.server"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: a PPK2 measures one supply, the client's "
            f'(meter.source = "{meter.source}"); unset it: server = "none"'
        )
    if meter.mode == "source" and meter.supply_mv is None:
        # Unset: blame whoever unset it, else whoever asked for a source mode.
        deciding = stack.origins.get("meter.supply_mv") or stack.origin("meter.mode")
        raise ConfigError(
            f'{deciding}: meter.supply_mv: required when meter.mode is "source": the voltage '
            "the PPK2 powers the node at, 800..5000 mV"
        )
