"""The agent's one exception tree.

`AgentError` is the root. Its branches separate *our user's* mistakes (a bad option or site
directory: `UsageError`, exit status 2) from the *outside world's* (a peer that breaks HTTP/2, a
body that does not match the manifest). Every message is one line that names what is at fault.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AgentError(Exception):
    """Root of every error the agent raises on purpose."""

    exit_status = 1


class UsageError(AgentError):
    """A command-line option, setting or input file is wrong; the message names it."""

    exit_status = 2


class SettingsError(UsageError):
    """An HTTP/2 SETTINGS name or value given on the command line is unknown or out of range."""


class SiteError(UsageError):
    """A site directory or its manifest is missing, unreadable or inconsistent."""


class MarkerError(UsageError):
    """The requested trial marker (e.g. a GPIO line) cannot be used on this node."""


@dataclass(frozen=True)
class ProtocolCode:
    """An error code on the wire (a GOAWAY, RST_STREAM, RESET_STREAM, CONNECTION_CLOSE), in the
    code space of the `protocol` that defines it: "HTTP/2" (RFC 9113 section 7), "HTTP/3" (RFC
    9114 section 8.1) or "QUIC" (RFC 9000 section 20.1). `name` as the RFC names it; None for
    a code it does not define (a peer may send any)."""

    protocol: str
    value: int
    name: str | None

    @classmethod
    def among(cls, protocol: str, value: int, names: type[enum.IntEnum]) -> ProtocolCode:
        """`value` with the name its member of `names` (the protocol's codes) gives it, if any."""
        try:
            name: str | None = names(value).name
        except ValueError:
            name = None
        return cls(protocol, int(value), name)

    def __str__(self) -> str:
        named = "" if self.name is None else f"{self.name} "
        return f"{self.protocol} {named}0x{self.value:x}"

    def to_dict(self) -> dict[str, object]:
        return {"protocol": self.protocol, "value": self.value, "name": self.name}


class PeerProtocolError(AgentError):
    """The remote peer broke HTTP/2 or HTTP/3, or closed the connection unexpectedly.
    `error_code` is the code the peer sent, or we answered it with (as h2's exceptions carry
    theirs), named at the end of the message; None where the failure has none (a close
    without one, a body or header a workload refuses)."""

    def __init__(self, message: str, error_code: ProtocolCode | None = None) -> None:
        super().__init__(message if error_code is None else f"{message} ({error_code})")
        self.error_code = error_code


class FetchError(AgentError):
    """A page fetch failed: bad status, wrong body, timeout."""


class BodyMismatchError(FetchError):
    """A response body differs from the site manifest in size or sha256."""


class LifecycleError(AgentError):
    """A lifecycle was given an input its state does not take: a bug in the agent, never a
    peer's doing. Carries the state and the input."""

    def __init__(self, state: str, event: str) -> None:
        super().__init__(f"input {event!r} is not allowed in state {state!r}")
        self.state = state
        self.event = event


class ExchangeClosed(AgentError):
    """A stream an exchange (agent.server.exchange, agent.client.exchange) uses was reset, by
    either side, or its connection went away: nothing more can be received or sent on it."""


class ExchangeRefused(AgentError):
    """The peer does not offer what an exchange needs, e.g. an RFC 8441 extended CONNECT to a
    server that did not announce SETTINGS_ENABLE_CONNECT_PROTOCOL."""


class ExchangeStateError(AgentError):
    """An exchange was used out of order (a body before the headers, anything after the end):
    a bug in the workload that uses it."""


class TrialControlError(AgentError):
    """The trial-control exchange with a server agent (agent.trial_control) failed."""
