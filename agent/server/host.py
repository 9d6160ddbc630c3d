"""The narrow interface between a server connection and the server that runs it.

A `ServerConnection` sees its server only as a `ConnectionHost`: the SETTINGS to announce, the
limits to hold to, the handler that answers requests, the per-trial accounting, and being told
when it opens and closes. It never imports the server app (agent.server.app), which holds the
connections, the ledger and the trial log; tests can host a connection on anything with these
members.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from h2.settings import SettingCodes

from agent.limits import ConnectionLimits
from agent.protocols.in_force import SettingsExchange
from agent.server.handler import Reply, Streamed
from agent.server.ledger import Note
from agent.server.request import Request
from agent.traffic import FrameCounts


class HostedConnection(Protocol):
    """What the host may do with a connection it holds: end it gracefully at shutdown, and
    close it to make room for another when it serves nothing (the longest idle first)."""

    @property
    def sheddable(self) -> bool: ...

    @property
    def last_progress_s(self) -> float:
        """Event-loop time of the connection's last progress (agent.limits)."""
        ...

    def drain(self) -> None: ...

    def shed(self) -> None: ...


class ConnectionHost(Protocol):
    @property
    def h2_settings(self) -> Mapping[SettingCodes, int]:
        """The SETTINGS every connection announces in its first frame."""
        ...

    @property
    def limits(self) -> ConnectionLimits:
        """The handshake deadline and idle timeout every connection holds to."""
        ...

    def handle(self, request: Request) -> Reply | Streamed:
        """The workload's answer to one request."""
        ...

    def connection_opened(self, connection: HostedConnection) -> None: ...

    def connection_closed(self, connection: HostedConnection, failed: bool) -> None:
        """The transport is gone; `failed`: the peer broke HTTP/2 or a limit first."""
        ...

    @property
    def controlled_trial(self) -> str | None:
        """The trial a client brackets by control messages now (agent.server.control), to which
        a request without the trial header belongs; None outside one."""
        ...

    def trial_request(self, trial_id: str, connection_id: int) -> None:
        """A request tagged with `trial_id` arrived on the connection."""
        ...

    def trial_responses_done(self, trial_ids: Sequence[str]) -> None:
        """The last byte of one response of each of these trials was handed to the kernel."""
        ...

    def trial_stream_reset(self, trial_id: str) -> None: ...

    def trial_noted(self, trial_id: str, note: Note) -> None:
        """What the connection saw of the trial besides requests (agent.server.ledger.Note)."""
        ...

    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        *,
        settings: SettingsExchange | None,
    ) -> None:
        """The connection stopped carrying the trial; its frames while it did, and what it
        announced and received (agent.protocols.in_force)."""
        ...
