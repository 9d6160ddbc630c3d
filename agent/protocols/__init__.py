"""The protocols a trial runs over, by name: what each declares (`ProtocolSpec`).

A protocol is declared once, beside its own code (agent/h2/protocol.py, agent/h3/protocol.py);
this registry maps names to those declarations. Everything else (the agent's commands, the
engines, the workloads, the controller's config, the records) carries a protocol by its name
and asks `protocol_spec(name)` what it is: whether it needs TLS, runs over QUIC, which ALPN it
negotiates. Light: the declarations are data and import no stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from agent.errors import UsageError
from agent.protocols.spec import ProtocolSpec
from agent.registry import Registry

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "ProtocolSpec",
    "protocol_of_scheme",
    "protocol_spec",
    "protocols_where",
]

# name: the module and name of its declaration, in the order listings show them.
_DECLARATIONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "h2c": ("agent.h2.protocol", "H2C"),
        "h2": ("agent.h2.protocol", "H2"),
        "h3": ("agent.h3.protocol", "H3"),
    }
)
PROTOCOLS: tuple[str, ...] = tuple(_DECLARATIONS)
DEFAULT_PROTOCOL = "h2c"
"""The study's: HTTP/2 in cleartext with prior knowledge."""


_REGISTRY: Registry[ProtocolSpec] = Registry(
    "protocol", _DECLARATIONS, entry_points=None, name_of=lambda spec: spec.name, error=UsageError
)


def protocol_spec(name: str) -> ProtocolSpec:
    return _REGISTRY.load(name)


def protocols_where(*, quic: bool | None = None, tls: bool | None = None) -> tuple[str, ...]:
    """The protocols with the given traits, in the registry's order."""
    return tuple(
        name
        for name in PROTOCOLS
        if (quic is None or protocol_spec(name).quic == quic)
        and (tls is None or protocol_spec(name).tls == tls)
    )


def protocol_of_scheme(scheme: str) -> str:
    """The TCP protocol a URL's scheme names by itself (http: cleartext, https: TLS)."""
    for name in protocols_where(quic=False):
        if protocol_spec(name).scheme == scheme:
            return name
    raise UsageError(f"no protocol is reached by a {scheme!r} URL (expected http or https)")
