"""The engines an agent runs a protocol with, by name: what each declares (`EngineSpec`).

An engine is declared once, in its own folder (agent/engines/<name>/spec.py) beside its code
and its `serve` and `trial` entry points; this registry maps names to those declarations,
loading one only when asked. The agent's commands dispatch through it, the controller's config
and sweep ask it (`engine_spec(name)`), and no engine's name is written anywhere else.

An engine of one's own, like a workload, needs no change here: a package installed beside the
agent names its declaration in the `h2iot.engines` entry-point group (e.g.
`mine = "my_engine.spec:MINE"`); built-in names win.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from agent.engines.spec import (
    UNREPRESENTABLE_POLICIES,
    EngineSpec,
    UnrepresentablePolicy,
)
from agent.errors import UsageError
from agent.registry import Registry

__all__ = [
    "BUILT_IN_ENGINES",
    "DEFAULT_ENGINE",
    "ENGINE_OF_UNNAMED_RUNS",
    "RENAMED",
    "UNREPRESENTABLE_POLICIES",
    "EngineSpec",
    "UnrepresentablePolicy",
    "engine_label",
    "engine_names",
    "engine_spec",
    "engines_where",
]

# name: the module and name of its declaration, in the order listings show them.
_DECLARATIONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "builtin": ("agent.engines.builtin.spec", "BUILTIN"),
        "nghttp2": ("agent.engines.nghttp2.spec", "NGHTTP2"),
        "hypercorn": ("agent.engines.hypercorn.spec", "HYPERCORN"),
    }
)
BUILT_IN_ENGINES: tuple[str, ...] = tuple(_DECLARATIONS)
DEFAULT_ENGINE = "builtin"
RENAMED: Mapping[str, str] = MappingProxyType({"h2": "builtin"})
"""Engines' former names, refused in one line naming the new one (for a release): `h2` is a
protocol's name."""
ENGINE_OF_UNNAMED_RUNS = "h2"
"""What a run whose manifest names no engine ran: the agent's own, under its former name (the
name analysis shows for it, as those runs' reports always have)."""
ENTRY_POINTS = "h2iot.engines"


_REGISTRY: Registry[EngineSpec] = Registry(
    "engine",
    _DECLARATIONS,
    entry_points=ENTRY_POINTS,
    name_of=lambda spec: spec.name,
    error=UsageError,
)


def engine_names() -> tuple[str, ...]:
    """Every engine: the built-in ones, then those installed packages declare."""
    return _REGISTRY.names()


def engine_spec(name: str) -> EngineSpec:
    if name in RENAMED:
        raise UsageError(f"engine {name!r} is now called {RENAMED[name]!r}: use that name")
    return _REGISTRY.load(name)


def engine_label(name: str) -> str:
    """How reports name the engine `name`, a former name included (for runs recorded with it)."""
    return engine_spec(RENAMED.get(name, name)).label


def engines_where(
    *, protocol: str | None = None, workload: str | None = None, client: bool | None = None
) -> tuple[str, ...]:
    """The engines that run `protocol`, `workload` (its client side with `client`) and
    (client True) a client side."""
    return tuple(
        name
        for name in engine_names()
        if (protocol is None or engine_spec(name).runs_protocol(protocol))
        and (workload is None or engine_spec(name).runs_workload(workload, client=bool(client)))
        and (client is None or engine_spec(name).serves_only != client)
    )
