"""Sweep configuration: TOML files (never executed) layered over built-in defaults.

`load_config(path, overrides)` merges built-in defaults < the TOML file < `--set KEY=VALUE`
overrides into a validated, frozen `Config`; `configs/README.md` documents every key.
"""

from __future__ import annotations

from controller.config.load import DEFAULT_CONFIG_PATH, load_config
from controller.config.model import (
    Config,
    LinkConfig,
    MeterConfig,
    NodeConfig,
    RunConfig,
    SweepConfig,
    WorkloadConfig,
)

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "Config",
    "LinkConfig",
    "MeterConfig",
    "NodeConfig",
    "RunConfig",
    "SweepConfig",
    "WorkloadConfig",
    "load_config",
]
