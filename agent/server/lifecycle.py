"""A server connection's lifecycle, sans-IO: one state, one table of the inputs each state takes.

    NEW --made--> HANDSHAKE --preface--> OPEN --drain--> DRAINING --idle--> CLOSING --lost--> CLOSED
                      |                    |                 |
                      +--------------------+-- failure ------+--> FAILED --lost--> CLOSED
                                           +-- peer GOAWAY --+--> CLOSING
                                           +-- idle timeout -----> CLOSING

- HANDSHAKE: our SETTINGS are out, the handshake timer runs until the peer's preface and first
  SETTINGS frame are in (a preface alone, or part of one, does not end it).
- OPEN: the idle timer runs; no progress for the idle timeout ends the connection.
- DRAINING: we sent GOAWAY (shutdown); streams in flight finish, new ones are refused.
- CLOSING: we closed the transport after a graceful end or the peer's GOAWAY.
- FAILED: the peer broke HTTP/2 or a limit; GOAWAY with the error is out, the transport closing.
- CLOSED: the transport is gone; nothing more happens.

`drain` is idempotent where the connection is already ending. Any pair not in the table is a
bug in the connection, not something a peer can cause: `advance` raises LifecycleError.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from agent.transitions import TableLifecycle


class State(enum.Enum):
    NEW = "new"
    HANDSHAKE = "handshake"
    OPEN = "open"
    DRAINING = "draining"
    CLOSING = "closing"
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
        (_S.OPEN, _I.PEER_GOAWAY): _S.CLOSING,
        (_S.OPEN, _I.IDLE_TIMEOUT): _S.CLOSING,
        (_S.OPEN, _I.FAILURE): _S.FAILED,
        (_S.OPEN, _I.LOST): _S.CLOSED,
        (_S.DRAINING, _I.DRAIN): _S.DRAINING,
        (_S.DRAINING, _I.IDLE): _S.CLOSING,
        (_S.DRAINING, _I.PEER_GOAWAY): _S.CLOSING,
        (_S.DRAINING, _I.FAILURE): _S.FAILED,
        (_S.DRAINING, _I.LOST): _S.CLOSED,
        # The server drains every connection it still holds, including those already ending.
        (_S.CLOSING, _I.DRAIN): _S.CLOSING,
        (_S.CLOSING, _I.LOST): _S.CLOSED,
        (_S.FAILED, _I.DRAIN): _S.FAILED,
        (_S.FAILED, _I.LOST): _S.CLOSED,
    }
)

# States in which the transport is closed or closing: bytes still delivered are not read.
ENDED: frozenset[State] = frozenset({State.CLOSING, State.FAILED, State.CLOSED})


class Lifecycle(TableLifecycle[State, Input]):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(TRANSITIONS, State.NEW)
