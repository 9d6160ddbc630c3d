"""Layers and how they stack: reading a TOML file, parsing `--set` overrides, merging.

The merge rule lives in one place, `Stack.apply`: a table a layer gives merges into the table
below it key by key, and any other value replaces the one below it. Two tables are values rather
than sections: [sweep] and meter.channels. A layer that gives either as a table replaces it whole
(a file's sweep is exactly the file's, not the defaults' plus the file's), while an override of
one entry (`--set sweep.max_concurrent_streams=[1, 100]`) adds or replaces just that entry, and
the value "none" removes it.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config.schema import check_layer
from controller.errors import ConfigError

OVERRIDES = "--set"
"""The name overrides go by in messages and in `Config.layers`."""

WHOLE: frozenset[tuple[str, ...]] = frozenset({("sweep",), ("meter", "channels")})

KeyPath = tuple[str, ...]


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file (data only, never executed); any failure is one line naming the file."""
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: TOML syntax error: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a TOML file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def parse_value(raw: str) -> Any:
    """A TOML value (`10`, `0.5`, `[1, 2]`, `"x"`, `{a = 1}`), else the text as a bare string."""
    try:
        document = tomllib.loads(f"value = {raw}")
    except tomllib.TOMLDecodeError:
        return raw
    # A newline in the text could smuggle in more keys: then it is not one value.
    return document["value"] if document.keys() == {"value"} else raw


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """`run.repetitions=10` -> (("run", "repetitions"), 10)."""
    key, sep, raw = text.partition("=")
    if not sep:
        raise ConfigError(
            f"{OVERRIDES}: {json.dumps(text)} must look like KEY=VALUE, e.g. run.repetitions=10"
        )
    path = tuple(part.strip() for part in key.strip().split("."))
    if not all(path):
        raise ConfigError(
            f"{OVERRIDES}: {json.dumps(key)} is not a dotted key like run.repetitions"
        )
    return path, parse_value(raw.strip())


def _nest(path: KeyPath, value: Any) -> dict[str, Any]:
    for part in reversed(path):
        value = {part: value}
    return dict(value)


def check_override(text: str) -> tuple[KeyPath, Any]:
    """Parse and check one override; the key comes back canonical (sweep setting names)."""
    path, raw = parse_override(text)
    node: Any = check_layer(_nest(path, raw), OVERRIDES)
    canonical: list[str] = []
    for _ in path:
        ((key, node),) = node.items()
        canonical.append(key)
    return tuple(canonical), node


def dotted(path: KeyPath) -> str:
    return ".".join(path)


@dataclass
class Stack:
    """The merged tree so far, and which layer set each value."""

    tree: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # dotted key of a value -> layer
    touched: dict[str, str] = field(default_factory=dict)  # dotted key of a table -> last layer
    layers: list[str] = field(default_factory=list)

    def push(self, source: str, values: Iterable[tuple[KeyPath, Any]]) -> None:
        """Apply one layer's checked values, in order."""
        self.layers.append(source)
        for path, value in values:
            self.apply(path, value, source)

    def apply(self, path: KeyPath, value: Any, source: str) -> None:
        *parents, key = path
        table = self.tree
        for depth, part in enumerate(parents, start=1):
            self.touched[dotted(path[:depth])] = source
            table = table.setdefault(part, {})
        here = dotted(path)
        if isinstance(value, dict):
            self.touched[here] = source
            if path in WHOLE or not isinstance(table.get(key), dict):
                self._forget(here)
                table[key] = {}
            for child, item in value.items():
                self.apply((*path, child), item, source)
        elif value is None and tuple(parents) in WHOLE:
            table.pop(key, None)
            self.origins.pop(here, None)
        else:
            table[key] = value
            self.origins[here] = source

    def _forget(self, here: str) -> None:
        for key in [key for key in self.origins if key == here or key.startswith(here + ".")]:
            del self.origins[key]

    def origin(self, key: str) -> str:
        """The layer to blame for a key: the one that set it, else the last one inside its table."""
        while key:
            if key in self.origins:
                return self.origins[key]
            if key in self.touched:
                return self.touched[key]
            key = key.rpartition(".")[0]
        return self.layers[0]
