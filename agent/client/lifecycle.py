"""A client connection's lifecycle, sans-IO: one state, one table, and why a connection that
ended before we closed it ended.

    NEW --made--> HANDSHAKE --settings--> OPEN --close--> CLOSING --lost--> CLOSED
                      |                    |
                      +-- peer GOAWAY -----+--> GONE_AWAY --close--> CLOSING
                      +-- failure ---------+--> FAILED --lost--> CLOSED
                      +-- lost (the server closed, or the network failed) --> CLOSED

- HANDSHAKE: our preface and SETTINGS are out; the server's first SETTINGS frame is not in.
- OPEN: requests may go out.
- GONE_AWAY: the server sent GOAWAY; what is in flight has failed, nothing more goes out.
- CLOSING: we sent GOAWAY and closed the transport (the trial is done, or timed out).
- FAILED: the server broke HTTP/2; our GOAWAY with the error is out, the transport closing.
- CLOSED: the transport is gone.

The server's bytes may still carry a GOAWAY or a broken frame while we close, so CLOSING takes
them and stays. Any other pair not in the table is a bug in the connection: LifecycleError.
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
    GONE_AWAY = "gone_away"
    CLOSING = "closing"
    FAILED = "failed"
    CLOSED = "closed"


class Input(enum.Enum):
    MADE = "made"  # the transport is up (asyncio's connection_made)
    SETTINGS = "settings"  # the server's first SETTINGS frame
    PEER_GOAWAY = "peer_goaway"  # the server sent GOAWAY
    CLOSE = "close"  # we end the connection
    FAILURE = "failure"  # the server broke HTTP/2
    LOST = "lost"  # the transport is gone (asyncio's connection_lost)


_S, _I = State, Input
TRANSITIONS: Mapping[tuple[State, Input], State] = MappingProxyType(
    {
        (_S.NEW, _I.MADE): _S.HANDSHAKE,
        (_S.HANDSHAKE, _I.SETTINGS): _S.OPEN,
        (_S.HANDSHAKE, _I.PEER_GOAWAY): _S.GONE_AWAY,
        (_S.HANDSHAKE, _I.CLOSE): _S.CLOSING,
        (_S.HANDSHAKE, _I.FAILURE): _S.FAILED,
        (_S.HANDSHAKE, _I.LOST): _S.CLOSED,
        (_S.OPEN, _I.PEER_GOAWAY): _S.GONE_AWAY,
        (_S.OPEN, _I.CLOSE): _S.CLOSING,
        (_S.OPEN, _I.FAILURE): _S.FAILED,
        (_S.OPEN, _I.LOST): _S.CLOSED,
        # A server may send GOAWAY more than once (RFC 9113 section 6.8).
        (_S.GONE_AWAY, _I.PEER_GOAWAY): _S.GONE_AWAY,
        (_S.GONE_AWAY, _I.CLOSE): _S.CLOSING,
        (_S.GONE_AWAY, _I.FAILURE): _S.FAILED,
        (_S.GONE_AWAY, _I.LOST): _S.CLOSED,
        # We may close before the server's first SETTINGS (a trial's timeout).
        (_S.CLOSING, _I.SETTINGS): _S.CLOSING,
        (_S.CLOSING, _I.PEER_GOAWAY): _S.CLOSING,
        (_S.CLOSING, _I.FAILURE): _S.CLOSING,
        (_S.CLOSING, _I.CLOSE): _S.CLOSING,
        (_S.CLOSING, _I.LOST): _S.CLOSED,
        (_S.FAILED, _I.CLOSE): _S.FAILED,
        (_S.FAILED, _I.LOST): _S.CLOSED,
        (_S.CLOSED, _I.CLOSE): _S.CLOSED,
    }
)

_WHILE = {
    State.HANDSHAKE: "before its first SETTINGS frame",
    State.OPEN: "with the trial's streams open",
    State.GONE_AWAY: "after its GOAWAY",
}


def lost_reason(state: State, exc: BaseException | None) -> str | None:
    """Why the connection ended, as one line, when it ended in `state` with asyncio's `exc`;
    None where nothing is to be said: we closed it, or its failure was reported already."""
    if state not in _WHILE:
        return None
    if exc is None:
        return f"server closed the connection {_WHILE[state]}"
    said = str(exc) or type(exc).__name__
    return f"connection lost {_WHILE[state]}: {type(exc).__name__}: {said}"


class ClientLifecycle(TableLifecycle[State, Input]):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(TRANSITIONS, State.NEW)
