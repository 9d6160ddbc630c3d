"""An HTTP/3 server connection's lifecycle, sans-IO: one state, one table of the inputs each
state takes (agent.transitions, as the HTTP/2 server's agent.server.lifecycle), and why a
connection ended.

    HANDSHAKE --negotiated--> OPEN --trial--> SERVING --trial--> SERVING
        |                      |                 |
        +----------------------+-----------------+-- drain -----> DRAINED
        +----------------------+-----------------+-- terminated -> TERMINATED

- HANDSHAKE: qh3 made the connection for a client's Initial; ALPN has not chosen HTTP/3 yet.
- OPEN: HTTP/3 is up; no trial has begun (the first trial's counts start from the connection's
  opening, so its handshake is the trial's).
- SERVING: a trial has begun; each later trial's counts start at its first request.
- DRAINED: we closed it (the server's shutdown), or dropped it in its handshake (room made for
  a new connection, or its handshake overdue).
- TERMINATED: qh3 ended it: the peer's CONNECTION_CLOSE, the idle timeout, a protocol error.

Both ends are final: what qh3 still reports for an ended connection is not read, and the server
may drain what it holds more than once. Any other pair not in the table is a bug in the
connection: LifecycleError. qh3 keeps the transport's own states (handshake keys, draining,
its idle timer); this table keeps what the server does with the connection.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from agent.errors import ProtocolCode
from agent.transitions import TableLifecycle


class State(enum.Enum):
    HANDSHAKE = "handshake"
    OPEN = "open"
    SERVING = "serving"
    DRAINED = "drained"
    TERMINATED = "terminated"


class Input(enum.Enum):
    NEGOTIATED = "negotiated"  # ALPN chose HTTP/3 (qh3's ProtocolNegotiated)
    TRIAL = "trial"  # a trial's first request on this connection
    DRAIN = "drain"  # we close it: shutdown, room for a new connection, handshake overdue
    TERMINATED = "terminated"  # qh3's ConnectionTerminated


_S, _I = State, Input
TRANSITIONS: Mapping[tuple[State, Input], State] = MappingProxyType(
    {
        (_S.HANDSHAKE, _I.NEGOTIATED): _S.OPEN,
        (_S.HANDSHAKE, _I.DRAIN): _S.DRAINED,
        (_S.HANDSHAKE, _I.TERMINATED): _S.TERMINATED,
        (_S.OPEN, _I.TRIAL): _S.SERVING,
        (_S.OPEN, _I.DRAIN): _S.DRAINED,
        (_S.OPEN, _I.TERMINATED): _S.TERMINATED,
        (_S.SERVING, _I.TRIAL): _S.SERVING,
        (_S.SERVING, _I.DRAIN): _S.DRAINED,
        (_S.SERVING, _I.TERMINATED): _S.TERMINATED,
        (_S.DRAINED, _I.DRAIN): _S.DRAINED,
        (_S.TERMINATED, _I.DRAIN): _S.TERMINATED,
    }
)

ENDED: frozenset[State] = frozenset({State.DRAINED, State.TERMINATED})

_WHILE = {
    State.HANDSHAKE: "in its handshake",
    State.OPEN: "before any trial",
    State.SERVING: "with trials served",
}


def ended_reason(state: State, close: tuple[ProtocolCode, str] | None) -> str:
    """Why the connection ended, as one line, when it ended in `state`; `close` is qh3's
    ConnectionTerminated's code and reason, None when we closed it."""
    if close is None:
        return (
            f"we closed it {_WHILE[state]} "
            "(shutdown, room for a new connection, or its handshake overdue)"
        )
    code, reason = close
    return f"closed {_WHILE[state]}: {reason or 'no reason given'} ({code})"


class H3Lifecycle(TableLifecycle[State, Input]):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(TRANSITIONS, State.HANDSHAKE)
