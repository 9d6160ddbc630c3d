"""`load_config`: the one function that layers a sweep's configuration.

Built-in defaults < the TOML file < `--set KEY=VALUE` overrides. Each layer is checked on its
own (so an error names the file, or "--set", and the dotted key), then merged by the rule in
`controller.config.layers.Stack.apply`, then turned into a frozen `Config` whose `layers` and
`origins` record which layer set what.

The layers above the defaults are data too (`Layer`): a run records them in its manifest, so
that `h2iot sweep --resume RUN_DIR` rebuilds the run's config from the run alone, whatever has
become of the file since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config.build import DEFAULTS, build, default_values
from controller.config.layers import OVERRIDES, Stack, check_override, read_toml
from controller.config.model import Config
from controller.config.schema import check_layer
from controller.errors import ConfigError

DEFAULT_CONFIG_PATH = Path("configs/local.toml")
"""The embedded default (local nodes, virtual meter), relative to the repository's root."""


@dataclass(frozen=True)
class Layer:
    """One layer above the built-in defaults, as the user gave it: a TOML file's table (as it
    read when the run started), or the `--set` overrides' texts, in order."""

    source: str  # the file's path, or OVERRIDES
    table: Mapping[str, Any] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a run's manifest records (`config_layers`)."""
        if self.source == OVERRIDES:
            return {"source": self.source, "overrides": list(self.overrides)}
        return {"source": self.source, "table": dict(self.table)}

    @classmethod
    def from_dict(cls, record: Any, where: str) -> Layer:
        """A recorded layer; ConfigError naming `where` (the manifest) when it is malformed."""
        if isinstance(record, Mapping) and isinstance(record.get("source"), str):
            source = record["source"]
            table, overrides = record.get("table"), record.get("overrides")
            if source == OVERRIDES and isinstance(overrides, list):
                if all(isinstance(text, str) for text in overrides):
                    return cls(source, overrides=tuple(overrides))
            elif source != OVERRIDES and isinstance(table, Mapping):
                return cls(source, table=dict(table))
        raise ConfigError(f"{where}: config_layers: {str(record)[:80]} is not a recorded layer")


def read_layers(path: Path | None, overrides: Sequence[str] = ()) -> tuple[Layer, ...]:
    """The layers a command line gives: the TOML file at `path` (none if None), then the
    overrides (none if empty). Reading only: nothing is checked yet."""
    layers = [] if path is None else [Layer(str(path), table=read_toml(path))]
    if overrides:
        layers.append(Layer(OVERRIDES, overrides=tuple(overrides)))
    return tuple(layers)


def with_overrides(layers: Sequence[Layer], overrides: Sequence[str]) -> tuple[Layer, ...]:
    """`layers` with more overrides on top (joined to theirs when the last layer has some)."""
    if not overrides:
        return tuple(layers)
    if layers and layers[-1].source == OVERRIDES:
        *below, last = layers
        return (*below, Layer(OVERRIDES, overrides=(*last.overrides, *overrides)))
    return (*layers, Layer(OVERRIDES, overrides=tuple(overrides)))


def config_of(layers: Sequence[Layer]) -> Config:
    """Built-in defaults < each layer in order, checked and merged into a `Config`."""
    stack = Stack()
    stack.push(DEFAULTS, default_values())
    source = DEFAULTS
    for layer in layers:
        if layer.source == OVERRIDES:
            stack.push(OVERRIDES, [check_override(text) for text in layer.overrides])
        else:
            source = layer.source
            checked = check_layer(layer.table, source)
            stack.push(source, (((key,), value) for key, value in checked.items()))
    return build(stack, source)


def load_config(path: Path | None, overrides: Sequence[str] = ()) -> Config:
    """Merge built-in defaults < the TOML file at `path` (none if None) < `overrides`.

    An override is `dotted.key=value`; the value is parsed as TOML, falling back to the bare
    text (`--set meter.port=/dev/ttyUSB0`); "none" unsets an optional key. Raises ConfigError
    with a one-line message naming the file (or "--set") and the key at fault.
    """
    return config_of(read_layers(path, overrides))
