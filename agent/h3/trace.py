"""qh3's QUIC events of a long-lived server, handed out a trial at a time: a `QuicLogger` whose
per-connection traces give up the events they hold (`take`), so a server connection writes each
trial's events as the trial leaves it (agent/README.md, Event traces), as the HTTP/2 server does
with agent.h2.trace.

qh3's own `QuicLogger` keeps every connection's trace for the process's life: a server serving
thousands of trials would hold them all. This one keeps none; the connection holds its own.
qh3 stamps each event with the wall clock in milliseconds (`time`).
"""

from __future__ import annotations

from typing import Any

from qh3.quic.logger import QuicLogger, QuicLoggerTrace


class TrialQuicTrace(QuicLoggerTrace):
    """One connection's events since the last `take`."""

    def take(self) -> list[dict[str, Any]]:
        """The events so far, which the trace then forgets."""
        events = list(self._events)
        self._events.clear()
        return events


class TrialQuicLogger(QuicLogger):
    """Hands each new connection a `TrialQuicTrace` and keeps nothing itself."""

    def start_trace(self, is_client: bool, odcid: bytes) -> TrialQuicTrace:
        return TrialQuicTrace(is_client=is_client, odcid=odcid)

    def end_trace(self, trace: QuicLoggerTrace) -> None:
        """The connection is gone: nothing is kept to forget (qh3's asserts it kept it)."""


def connection_trace(quic: object) -> TrialQuicTrace | None:
    """The trace a connection's configuration gave it (qh3 keeps it as the connection's
    `_quic_logger`: qh3 is pinned), None untraced."""
    trace = getattr(quic, "_quic_logger", None)
    return trace if isinstance(trace, TrialQuicTrace) else None
