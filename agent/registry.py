"""A kind's registry: names -> declarations, each a module and an attribute loaded on first ask,
the built-in ones first, then those installed packages name in an entry-point group (scanned only
when a name is not built in, so a built-in kind pays nothing for it). The workloads, engines and
protocols and the controller's meter sources are each one of these."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def load_dotted(dotted: str) -> Any:
    """What `module:name` names, its module imported now (a kind's code loads only when used)."""
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


class Registry(Generic[T]):
    def __init__(
        self,
        what: str,
        built_in: Mapping[str, tuple[str, str]],
        *,
        entry_points: str | None,
        name_of: Callable[[T], str],
        error: Callable[[str], Exception],
    ) -> None:
        self.what = what  # how messages name the kind: "workload", "engine", ...
        self.built_in: tuple[str, ...] = tuple(built_in)
        self._built_in = MappingProxyType(dict(built_in))
        self.entry_points = entry_points
        self._name_of = name_of
        self._error = error
        self.load = cache(self._load)

    @cache  # noqa: B019  (a registry lives as long as the process)
    def installed(self) -> Mapping[str, tuple[str, str]]:
        """What installed packages declare in the entry-point group, by name; built-ins win."""
        if self.entry_points is None:
            return MappingProxyType({})
        from importlib.metadata import entry_points  # noqa: PLC0415  (scans every package)

        found = {}
        for point in entry_points(group=self.entry_points):
            module, _, attribute = point.value.partition(":")
            if point.name not in self._built_in and module and attribute:
                found[point.name] = (module.strip(), attribute.strip())
        return MappingProxyType(found)

    def names(self) -> tuple[str, ...]:
        """Every name: the built-in ones, then the installed ones."""
        return (*self.built_in, *self.installed())

    def declaration(self, name: str) -> tuple[str, str]:
        """The module and attribute declaring `name`; the kind's error naming the known ones."""
        known = self._built_in.get(name) or self.installed().get(name)
        if known is None:
            raise self._error(f"unknown {self.what} {name!r} (known: {', '.join(self.names())})")
        return known

    def _load(self, name: str) -> T:
        module, attribute = self.declaration(name)
        spec: T = load_dotted(f"{module}:{attribute}")
        if self._name_of(spec) != name:
            declared = self._name_of(spec)
            raise self._error(f"{self.what} {name!r}: {module}:{attribute} declares {declared!r}")
        return spec
