"""Trials bracketed by trial-control messages on the agent's own server (`serve --control-port`),
for a client that sends no trial header (ngtcp2's gtlsclient runs a process per exchange and
takes no header of ours). Between the client's `begin` and `end` (agent.trial_control), a
request without the header belongs to the bracketed trial and keeps it open across the
connections the client opens, as a request saying it continues would (agent.server.ledger);
`end` lets it close once no connection carries it. A request with the header is counted by it,
as ever. The answer to `end` comes before the record is written when a connection still
carries the trial (its close has not been read yet): the controller waits for the record.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from agent.trial_control import Begin, End, listen_control


class ControlledServer(Protocol):
    """What the control port asks of the server (agent.server.app.ServerApp)."""

    def control_begin(self, trial_id: str) -> None: ...

    def control_end(self, trial_id: str) -> None: ...


class ControlledTrials:
    """The control port's side (agent.trial_control.TrialBrackets) on the server."""

    def __init__(self, app: ControlledServer) -> None:
        self._app = app

    async def begin(self, message: Begin) -> None:
        self._app.control_begin(message.trial_id)

    async def end(self, message: End) -> None:
        # The server counts the trial's requests and responses itself: the client's are not
        # needed here.
        self._app.control_end(message.trial_id)

    def abandon(self, trial_id: str) -> None:
        self._app.control_end(trial_id)


async def open_control(app: ControlledServer, host: str, port: int | None) -> asyncio.Server | None:
    """The control port when asked for (`port`; 0: a free one), else None."""
    if port is None:
        return None
    return await listen_control(ControlledTrials(app), host, port)


def announced(control: asyncio.Server | None) -> dict[str, int]:
    """The listening line's `control_port`, where the server listens for control messages."""
    if control is None:
        return {}
    return {"control_port": control.sockets[0].getsockname()[1]}
