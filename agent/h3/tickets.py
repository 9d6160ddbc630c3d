"""The HTTP/3 server's session tickets, sans-IO: qh3 issues one to each client at the end of
its handshake (allowing 0-RTT early data) and hands it here; a client that comes back presents
it and qh3 asks for it by its label.

Each ticket resumes one handshake: it is taken out as it is fetched, so a ClientHello replayed
with the same ticket (and the 0-RTT request it carried) finds none and gets a full handshake,
its early data refused (RFC 8446 8.1's single-use tickets, the anti-replay this server needs:
it is one process). A ticket also expires `lifetime_s` after it was issued; qh3 writes 86400 s
into every ticket it sends, so the shorter lifetime is kept here. What was refused is counted,
and so are the requests that came in early data, answered or refused (`ResumptionCounts`:
running totals since the server started, in each trial record's `transport`, so a peer that
tags no trial, ngtcp2's gtlsclient, is seen too).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass

from qh3.tls import SessionTicket

DEFAULT_LIFETIME_S = 86_400.0
# Tickets held at once: a client takes its newest; the oldest go first beyond this.
MAX_TICKETS = 10_000


@dataclass
class ResumptionCounts:
    issued: int = 0
    resumed: int = 0
    unknown: int = 0  # never issued, or already used: a replay
    expired: int = 0
    early_accepted: int = 0  # requests in 0-RTT early data the server acted on
    early_refused: int = 0  # and those it answered 425 Too Early

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class TicketStore:
    """qh3's session_ticket_handler (`add`) and session_ticket_fetcher (`pop`); `clock` in s."""

    def __init__(self, clock: Callable[[], float], lifetime_s: float = DEFAULT_LIFETIME_S) -> None:
        if not lifetime_s > 0:
            raise ValueError(f"a ticket lifetime of {lifetime_s} s")
        self._clock = clock
        self.lifetime_s = lifetime_s
        self._tickets: OrderedDict[bytes, tuple[SessionTicket, float]] = OrderedDict()
        self.counts = ResumptionCounts()

    def add(self, ticket: SessionTicket) -> None:
        self._tickets[ticket.ticket] = (ticket, self._clock() + self.lifetime_s)
        self.counts.issued += 1
        while len(self._tickets) > MAX_TICKETS:
            self._tickets.popitem(last=False)

    def pop(self, label: bytes) -> SessionTicket | None:
        held = self._tickets.pop(label, None)
        if held is None:
            self.counts.unknown += 1
            return None
        ticket, expires_s = held
        if self._clock() >= expires_s:
            self.counts.expired += 1
            return None
        self.counts.resumed += 1
        return ticket
