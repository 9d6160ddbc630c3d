"""What a protocol is to the testbed, as data (`ProtocolSpec`): the one form a protocol takes
from a config to the wire and back into a record."""

from __future__ import annotations

from dataclasses import dataclass

from agent.errors import UsageError


@dataclass(frozen=True)
class ProtocolSpec:
    name: str  # what configs, requests and records call it
    doc: str
    tls: bool  # encrypted: the node needs a certificate and key, the client an authority
    quic: bool  # over QUIC on UDP, not TCP
    alpn: str | None  # what TLS or QUIC negotiates; None: prior knowledge, no negotiation
    # How the study's HTTP/2-named settings reach this protocol: as HTTP/2 SETTINGS, or mapped
    # by the module named (one table, a setting without a counterpart refused naming it). Its
    # (or agent.h2.settings') IN_FORCE_KEYS name what carries each in either side's
    # announcement, to read what was in force (agent.protocols.in_force).
    settings_map: str | None = None
    # The pip extra holding its stack, and the module that stack is imported as; None: the
    # agent's core dependencies.
    extra: str | None = None
    stack_module: str | None = None

    def require_stack(self) -> None:
        """Its stack importable, else the one line that says how to get it."""
        import importlib.util  # noqa: PLC0415

        if self.stack_module is not None and importlib.util.find_spec(self.stack_module) is None:
            raise UsageError(
                f"--protocol {self.name} needs the agent's {self.extra} extra: "
                f"pip install 'h2iot[{self.extra}]'"
            )

    @property
    def scheme(self) -> str:
        """The URL scheme a client is pointed at it with."""
        return "https" if self.tls else "http"

    @property
    def transport(self) -> str:
        return "udp" if self.quic else "tcp"
