"""`load_config`: the one function that layers a sweep's configuration.

Built-in defaults < the TOML file < `--set KEY=VALUE` overrides. Each layer is checked on its
own (so an error names the file, or "--set", and the dotted key), then merged by the rule in
`controller.config.layers.Stack.apply`, then turned into a frozen `Config` whose `layers` and
`origins` record which layer set what.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from controller.config.build import DEFAULTS, build, default_values
from controller.config.layers import OVERRIDES, Stack, check_override, read_toml
from controller.config.model import Config
from controller.config.schema import check_layer

DEFAULT_CONFIG_PATH = Path("configs/local.toml")
"""The embedded default (local nodes, virtual meter), relative to the repository's root."""


def load_config(path: Path | None, overrides: Sequence[str] = ()) -> Config:
    """Merge built-in defaults < the TOML file at `path` (none if None) < `overrides`.

    An override is `dotted.key=value`; the value is parsed as TOML, falling back to the bare
    text (`--set meter.port=/dev/ttyUSB0`); "none" unsets an optional key. Raises ConfigError
    with a one-line message naming the file (or "--set") and the key at fault.
    """
    stack = Stack()
    stack.push(DEFAULTS, default_values())
    source = DEFAULTS
    if path is not None:
        source = str(path)
        checked = check_layer(read_toml(path), source)
        stack.push(source, (((key,), value) for key, value in checked.items()))
    if overrides:
        stack.push(OVERRIDES, [check_override(text) for text in overrides])
    return build(stack, source)
