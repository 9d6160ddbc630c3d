"""A server connection's trials: which trial each of its streams serves, and what the
connection sent and received for each, handed to the host's accounting (agent.server.ledger)
as trials begin, finish their responses and leave the connection. Sans-IO: the connection
calls it as requests arrive, responses end and streams are reset.

A connection carries one trial at a time (a client runs one per connection); a request of
another trial finishes the current one. Frames before the first trial's first request (the
preface, SETTINGS) count for that trial.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from agent.protocols.in_force import SettingsExchange
from agent.server.ledger import Note
from agent.traffic import FrameCounts


class Tally(Protocol):
    """One direction of a connection, counted so far (agent.h2.fastpath.SplitTally for HTTP/2;
    agent.server.h3_connection.QuicTally for HTTP/3)."""

    def counts(self) -> FrameCounts: ...


class TrialAccounting(Protocol):
    """The part of the connection's host (agent.server.host.ConnectionHost) that keeps the
    trials' ledger."""

    @property
    def controlled_trial(self) -> str | None: ...

    def trial_request(self, trial_id: str, connection_id: int) -> None: ...
    def trial_responses_done(self, trial_ids: Sequence[str]) -> None: ...
    def trial_stream_reset(self, trial_id: str) -> None: ...
    def trial_noted(self, trial_id: str, note: Note) -> None: ...
    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        *,
        settings: SettingsExchange | None,
    ) -> None: ...


class ConnectionTrials:
    def __init__(
        self,
        host: TrialAccounting,
        connection_id: int,
        tally_out: Tally,
        tally_in: Tally,
        settings: Callable[[], SettingsExchange | None],
        *,
        on_finish: Callable[[str], None] | None = None,
    ) -> None:
        """`settings`: what the connection announced and received so far (None before its
        stack exists), read as a trial leaves it. `on_finish`: told each trial's id as it
        leaves, before the host (the connection's event trace, written before the record)."""
        self._host = host
        self._on_finish = on_finish
        self._settings = settings
        self._id = connection_id
        self._tally_out = tally_out
        self._tally_in = tally_in
        self._streams: dict[int, str] = {}
        self._current: str | None = None
        # The connection's handshake resumed a TLS session: the note of each trial it carries.
        self._resumed = False
        self._marks = (tally_out.counts(), tally_in.counts())
        # Trials whose response ended in this write; the host hears of them once the bytes
        # have left user space (the connection's last-byte timer).
        self.done: list[str] = []

    def request(self, stream_id: int, trial_id: str | None, *, continues: bool = False) -> None:
        """A request of `trial_id` (its trial header's) arrived on `stream_id`; `continues`: it
        said its trial goes on after it (agent.trial_header.TRIAL_CONTINUES_HEADER). One
        without the header belongs to the trial its client brackets by control messages, if
        any, which goes on until the client's `end` (agent.server.control)."""
        if trial_id is None:
            trial_id, continues = self._host.controlled_trial, True
            if trial_id is None:
                return
        if self._current == trial_id:
            self._host.trial_request(trial_id, self._id)
        else:
            if self._current is not None:
                self.finish()
            else:
                self._marks = (FrameCounts.empty(), FrameCounts.empty())
            self._current = trial_id
            self._host.trial_request(trial_id, self._id)
            if self._resumed:
                self._host.trial_noted(trial_id, Note.RESUMED)
        if continues:
            self._host.trial_noted(trial_id, Note.CONTINUES)
        self._streams[stream_id] = trial_id

    def handshake_resumed(self) -> None:
        """The connection's handshake resumed a TLS session: noted for the trial it carries
        (whose 0-RTT request can come before the handshake is done) and each it will."""
        self._resumed = True
        if self._current is not None:
            self._host.trial_noted(self._current, Note.RESUMED)

    def early_data(self, stream_id: int, accepted: bool) -> None:
        """The request on `stream_id` came in 0-RTT early data, and was answered or refused."""
        trial_id = self._streams.get(stream_id)
        if trial_id is not None:
            self._host.trial_noted(
                trial_id, Note.EARLY_ACCEPTED if accepted else Note.EARLY_REFUSED
            )

    def response_done(self, stream_id: int) -> None:
        """The stream's response had its last frame queued."""
        trial_id = self._streams.pop(stream_id, None)
        if trial_id is not None:
            self.done.append(trial_id)

    def stream_reset(self, stream_id: int) -> None:
        trial_id = self._streams.pop(stream_id, None)
        if trial_id is not None:
            self._host.trial_stream_reset(trial_id)

    def last_bytes_left(self) -> None:
        """The responses ended so far have left user space."""
        self._host.trial_responses_done(self.done)
        self.done.clear()

    def finish(self) -> None:
        """The current trial leaves this connection (another began, or the connection ended):
        what was sent and received for it goes to the host."""
        if self._current is None:
            return
        if self.done:
            self.last_bytes_left()
        if self._on_finish is not None:
            self._on_finish(self._current)
        sent, received = self._tally_out.counts(), self._tally_in.counts()
        self._host.trial_detach(
            self._current,
            self._id,
            sent.minus(self._marks[0]),
            received.minus(self._marks[1]),
            settings=self._settings(),
        )
        self._marks = (sent, received)
        self._current = None
