"""How many QUIC connections the HTTP/3 server holds, from the memory it may give them, and the
connections still in their handshake, oldest first, with when each must be done. Sans-IO:
time is passed in.

A QUIC server keeps state for a connection from the client's first Initial on, before the
client has proved anything: a flood of genuine Initials never continued (or of garbage the
size of an Initial) makes a connection each, and qh3 would keep each until its idle timeout
(60 s), retransmitting its first flight meanwhile. Measured on 2026-12-06 (x86-64, Python 3.11,
qh3 2.1.0, `serve --protocol h3` at its default windows), each such half-open connection added
62 KiB to the server's RSS (3,000 took it from 32 MB to 218 MB; qh3's connection alone is
40 KiB of it: its native core, TLS state and Python objects) and each completed handshake left
silent 58 KiB (300 took it from 32 MB to 49 MB).

The limits, from the budget `agent.limits.connection_budget_bytes` gives (an eighth of the
node's available memory, at most 128 MiB):
- `max_connections`: the budget over what an open connection may cost, its RSS and the
  out-of-order data its peer may make qh3 buffer, up to the connection's receive window;
- `max_handshakes`: a quarter of the budget over what a half-open connection costs, so a flood
  of them keeps most of the budget for connections that complete;
- `handshake_timeout_s`: a connection whose handshake is not done by then is dropped. 10 s,
  the HTTP/2 server's: room for a client's first flight lost three times (qh3's first PTO is
  about 1 s and doubles: 1 + 2 + 4 s) on the study's slowest emulated link.

Over either cap the oldest half-open connection is dropped for the new one; a new connection
is refused only when every connection held has completed its handshake. A dropped half-open
connection gets no CONNECTION_CLOSE: its peer proved nothing, and the cheapest answer to a
flood is none (a genuine client retransmits its Initial and starts afresh).

The UDP server's single socket is the same for every connection, so the descriptor limit,
HTTP/2's other cap, does not apply.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from agent.limits import DEFAULT_HANDSHAKE_TIMEOUT_S

# Measured as the module's docstring says, rounded up.
HALF_OPEN_CONNECTION_BYTES = 64 * 2**10
OPEN_CONNECTION_BYTES = 64 * 2**10
# The budget's share that half-open connections may take.
HANDSHAKE_BUDGET_SHARE = 4


@dataclass(frozen=True)
class H3Limits:
    max_connections: int
    max_handshakes: int
    handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S

    def __post_init__(self) -> None:
        # Programming errors: the command line checks what users give.
        if not 1 <= self.max_handshakes <= self.max_connections:
            raise ValueError(f"caps must be 1 <= max_handshakes <= max_connections: {self}")
        if not self.handshake_timeout_s > 0:
            raise ValueError(f"handshake_timeout_s must be positive: {self}")

    def to_dict(self) -> dict[str, float | int]:
        return {
            "max_connections": self.max_connections,
            "max_handshakes": self.max_handshakes,
            "handshake_timeout_s": self.handshake_timeout_s,
        }


def h3_limits(
    budget_bytes: int,
    connection_window_bytes: int,
    max_connections: int | None = None,
    handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
) -> H3Limits:
    """The caps within `budget_bytes` for connections that receive up to
    `connection_window_bytes`; `max_connections`, where given, instead of the budget's."""
    if max_connections is None:
        open_bytes = OPEN_CONNECTION_BYTES + connection_window_bytes
        max_connections = max(1, budget_bytes // open_bytes)
    handshakes = budget_bytes // HANDSHAKE_BUDGET_SHARE // HALF_OPEN_CONNECTION_BYTES
    return H3Limits(
        max_connections=max_connections,
        max_handshakes=max(1, min(max_connections, handshakes)),
        handshake_timeout_s=handshake_timeout_s,
    )


C = TypeVar("C", bound=Hashable)


class Handshakes(Generic[C]):
    """The connections in their handshake, oldest first, and when each opened."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._opened_s: dict[C, float] = {}  # in the order they opened

    def __len__(self) -> int:
        return len(self._opened_s)

    def opened(self, connection: C, now_s: float) -> None:
        self._opened_s[connection] = now_s

    def done(self, connection: C) -> None:
        """Its handshake completed, or the connection ended; either may come twice."""
        self._opened_s.pop(connection, None)

    def expired(self, now_s: float) -> list[C]:
        """Those whose handshake is overdue at `now_s`, oldest first; no longer held here."""
        overdue: list[C] = []
        for connection, opened_s in self._opened_s.items():
            if now_s - opened_s < self.timeout_s:
                break
            overdue.append(connection)
        for connection in overdue:
            del self._opened_s[connection]
        return overdue

    def oldest(self, count: int) -> list[C]:
        """The `count` oldest, no longer held here (they are to be dropped)."""
        victims = list(itertools.islice(self._opened_s, max(0, count)))
        for connection in victims:
            del self._opened_s[connection]
        return victims

    def next_expiry_s(self) -> float | None:
        """When the oldest handshake becomes overdue; None when none is under way."""
        for opened_s in self._opened_s.values():
            return opened_s + self.timeout_s
        return None
