"""A server connection's lifecycle, sans-IO: one state, one table of the inputs each state takes,
and why a connection ended.

    NEW --made--> HANDSHAKE --preface--> OPEN --drain--> DRAINING --idle--> CLOSING --lost--> CLOSED
                      |                    |                 |
                      +--------------------+-- failure ------+--> FAILED --lost--> CLOSED
                                           +-- peer GOAWAY --+--> GONE_AWAY --lost--> CLOSED
                                           +-- idle timeout -----> TIMED_OUT --lost--> CLOSED

- HANDSHAKE: our SETTINGS are out, the handshake timer runs until the peer's preface and first
  SETTINGS frame are in (a preface alone, or part of one, does not end it).
- OPEN: the idle timer runs; no progress for the idle timeout ends the connection.
- DRAINING: we sent GOAWAY (shutdown); streams in flight finish, new ones are refused.
- CLOSING: drained; our GOAWAY's streams are done and we closed the transport.
- GONE_AWAY: the peer sent GOAWAY; we closed the transport.
- TIMED_OUT: idle for the idle timeout; GOAWAY NO_ERROR is out, the transport closing.
- FAILED: the peer broke HTTP/2 or a limit; GOAWAY with the error is out, the transport closing.
- CLOSED: the transport is gone; nothing more happens.

Each way of ending is a state of its own, so the state a connection was lost in says why it
ended (`ended_reason`). `drain` is idempotent where the connection is already ending. Any pair
not in the table is a bug in the connection, not something a peer can cause: `advance` raises
LifecycleError.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from agent.errors import ProtocolCode
from agent.transitions import TableLifecycle


class State(enum.Enum):
    NEW = "new"
    HANDSHAKE = "handshake"
    OPEN = "open"
    DRAINING = "draining"
    CLOSING = "closing"
    GONE_AWAY = "gone_away"
    TIMED_OUT = "timed_out"
    FAILED = "failed"
    CLOSED = "closed"


class Input(enum.Enum):
    MADE = "made"  # the transport is up (asyncio's connection_made)
    PREFACE = "preface"  # the peer's preface and first SETTINGS frame were accepted by h2
    DRAIN = "drain"  # graceful shutdown asked (SIGTERM)
    IDLE = "idle"  # draining, and no stream has anything left to send
    PEER_GOAWAY = "peer_goaway"  # the peer ended the connection
    IDLE_TIMEOUT = "idle_timeout"  # open, and nothing progressed for the idle timeout
    FAILURE = "failure"  # the peer broke HTTP/2, a limit or the handshake timeout
    LOST = "lost"  # the transport is gone (asyncio's connection_lost)


_S, _I = State, Input
TRANSITIONS: Mapping[tuple[State, Input], State] = MappingProxyType(
    {
        (_S.NEW, _I.MADE): _S.HANDSHAKE,
        (_S.HANDSHAKE, _I.PREFACE): _S.OPEN,
        (_S.HANDSHAKE, _I.DRAIN): _S.DRAINING,
        (_S.HANDSHAKE, _I.FAILURE): _S.FAILED,
        (_S.HANDSHAKE, _I.LOST): _S.CLOSED,
        (_S.OPEN, _I.DRAIN): _S.DRAINING,
        (_S.OPEN, _I.PEER_GOAWAY): _S.GONE_AWAY,
        (_S.OPEN, _I.IDLE_TIMEOUT): _S.TIMED_OUT,
        (_S.OPEN, _I.FAILURE): _S.FAILED,
        (_S.OPEN, _I.LOST): _S.CLOSED,
        (_S.DRAINING, _I.DRAIN): _S.DRAINING,
        (_S.DRAINING, _I.IDLE): _S.CLOSING,
        (_S.DRAINING, _I.PEER_GOAWAY): _S.GONE_AWAY,
        (_S.DRAINING, _I.FAILURE): _S.FAILED,
        (_S.DRAINING, _I.LOST): _S.CLOSED,
        # The server drains every connection it still holds, including those already ending.
        (_S.CLOSING, _I.DRAIN): _S.CLOSING,
        (_S.CLOSING, _I.LOST): _S.CLOSED,
        (_S.GONE_AWAY, _I.DRAIN): _S.GONE_AWAY,
        (_S.GONE_AWAY, _I.LOST): _S.CLOSED,
        (_S.TIMED_OUT, _I.DRAIN): _S.TIMED_OUT,
        (_S.TIMED_OUT, _I.LOST): _S.CLOSED,
        (_S.FAILED, _I.DRAIN): _S.FAILED,
        (_S.FAILED, _I.LOST): _S.CLOSED,
    }
)

# States in which the transport is closed or closing: bytes still delivered are not read.
ENDED: frozenset[State] = frozenset(
    {State.CLOSING, State.GONE_AWAY, State.TIMED_OUT, State.FAILED, State.CLOSED}
)

# The states the peer may leave without a GOAWAY, and how the line says when it did.
_WHILE = {
    State.HANDSHAKE: "before its preface and first SETTINGS frame",
    State.OPEN: "while open",
    State.DRAINING: "while we drained it",
}
# The states in which we closed the transport, and why.
_CLOSED_BY_US = {
    State.CLOSING: "drained: its streams finished after our GOAWAY{code}, and we closed it",
    State.GONE_AWAY: "the peer's GOAWAY{code} ended it, and we closed it",
    State.TIMED_OUT: "idle for the idle timeout: our GOAWAY{code}, and we closed it",
    State.FAILED: "it broke HTTP/2 or a limit: our GOAWAY{code}, and we closed it",
}


def ended_reason(state: State, exc: BaseException | None, code: ProtocolCode | None) -> str:
    """Why the connection ended, as one line, when its transport went in `state` with asyncio's
    `exc`; `code` is the last GOAWAY's, either side's, if one was sent."""
    said = "" if exc is None else f"{type(exc).__name__}: {str(exc) or type(exc).__name__}"
    if state in _WHILE:
        if exc is None:
            return f"the peer closed the connection {_WHILE[state]}"
        return f"connection lost {_WHILE[state]}: {said}"
    reason = _CLOSED_BY_US[state].format(code="" if code is None else f" ({code})")
    return reason if exc is None else f"{reason} ({said})"


class Lifecycle(TableLifecycle[State, Input]):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(TRANSITIONS, State.NEW)
