"""qh3's QUIC events of a connection, handed out a trial at a time: a `QuicLogger` whose
per-connection traces give up the events they hold (`take`), so a server connection writes each
trial's events as the trial leaves it (agent/README.md, Event traces), as the HTTP/2 server does
with agent.h2.trace, and a client writes its connection's after the trial.

qh3's own `QuicLogger` keeps every connection's trace for the process's life: a server serving
thousands of trials would hold them all. This one keeps none; the connection holds its own.
qh3 stamps each event with the wall clock in milliseconds (`time`).

qh3's trace holds each event as nested dicts and lists, several objects the cyclic garbage
collector tracks per datagram (30,000 more in a client fetching the 7 MB page at a 4096-byte
window: 25,000 -> 55,000). They outlive the young generations, so during the transfer they set
off full collections of the whole heap, each stopping the process 14-54 ms on the development
VM: the trace's "silent gaps", and a peer's probe timeout where a server's pause outlasted the
client's PTO (agent/README.md, "Silent gaps in HTTP/3 traces"). This trace holds each event
pickled instead: bytes, which the collector does not track, unpickled by `take` once the trial
is over.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

from qh3.quic.logger import QuicLogger, QuicLoggerTrace


class TrialQuicTrace(QuicLoggerTrace):
    """One connection's events since the last `take`, each held pickled (the module's
    docstring says why)."""

    def __init__(self, *, is_client: bool, odcid: bytes) -> None:
        super().__init__(is_client=is_client, odcid=odcid)
        self._pickled: list[bytes] = []

    def log_event(self, *, category: str, event: str, data: dict[str, Any]) -> None:
        self._pickled.append(
            pickle.dumps(
                (category + ":" + event, self.encode_time(time.time()), data),
                pickle.HIGHEST_PROTOCOL,
            )
        )

    def take(self) -> list[dict[str, Any]]:
        """The events so far, as qh3 makes them (`data`, `name`, `time`), which the trace
        then forgets."""
        events = [
            {"data": data, "name": name, "time": at}
            for name, at, data in map(pickle.loads, self._pickled)
        ]
        self._pickled.clear()
        return events


class TrialQuicLogger(QuicLogger):
    """Hands each new connection a `TrialQuicTrace` and keeps nothing itself."""

    def start_trace(self, is_client: bool, odcid: bytes) -> TrialQuicTrace:
        return TrialQuicTrace(is_client=is_client, odcid=odcid)

    def end_trace(self, trace: QuicLoggerTrace) -> None:
        """The connection is gone: nothing is kept to forget (qh3's asserts it kept it)."""


def connection_trace(quic: object) -> TrialQuicTrace | None:
    """The trace a connection's configuration gave it (qh3 keeps it as the connection's
    `_quic_logger` until the connection ends: qh3 is pinned), None untraced."""
    trace = getattr(quic, "_quic_logger", None)
    return trace if isinstance(trace, TrialQuicTrace) else None
