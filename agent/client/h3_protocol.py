"""The client's QUIC connection as asyncio's datagram protocol (qh3's), counting datagrams and
taking the tap's shorter paths; agent.client.h3 puts HTTP/3 and a trial's requests on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from qh3.asyncio.protocol import QuicConnectionProtocol
from qh3.quic.events import QuicEvent, StreamDataReceived

from agent.h3.stack import TappedQuicConnection, TransportCounts


class QuicClientProtocol(QuicConnectionProtocol):
    """qh3's datagram protocol for one connection, counting datagrams, events to `on_event`.
    Under a small window each round trip is a datagram or two in and one out, and qh3's Python
    around its native core was most of the client's CPU: the receive, the events and the
    transmit here take the tap's shorter paths (agent.h3.stack) and touch the loop's timer
    only when the core's deadline comes sooner."""

    def __init__(self, quic: TappedQuicConnection, counts: TransportCounts) -> None:
        super().__init__(quic)
        self.tapped = quic
        self.counts = counts
        self.on_event: Callable[[QuicEvent], None] = lambda event: None
        # Called before each transmit while `uploads` has exchanges with bytes to send.
        self.before_transmit: Callable[[], None] = lambda: None
        self.uploads: Mapping[int, object] = {}
        # The socket's first error (ICMP port unreachable: nothing listens on the UDP port).
        self.refused: asyncio.Future[OSError] = asyncio.get_running_loop().create_future()

    @property
    def handshake_done(self) -> bool:
        return bool(self._connected)

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        self.counts.datagrams_received += 1
        self.counts.bytes_received += len(data)
        super().datagram_received(data, addr)

    def datagrams_received(self, data: list[bytes], addr: Any) -> None:
        self.counts.datagrams_received += len(data)
        self.counts.bytes_received += sum(map(len, data))
        now = self._loop_time()
        self.tapped.receive_many_datagrams(data, addr, now=now)
        if self.tapped._events:
            self._process_events()
        self._transmit(now)

    def quic_event_received(self, event: QuicEvent) -> None:
        self.on_event(event)

    def _process_events(self) -> None:
        # Stream data, nearly every event of a transfer, needs none of qh3's handling of a
        # connection's own events (handshake, connection IDs, pings, the end): it goes
        # straight to on_event, and from the first other event on, qh3's loop takes the rest.
        events = self.tapped._events
        on_event = self.on_event
        while events:
            if type(events[0]) is not StreamDataReceived:
                super()._process_events()
                return
            on_event(events.popleft())

    def transmit(self) -> None:
        self._transmit(self._loop_time())

    def _transmit(self, now: float) -> None:
        """qh3's transmit, except that the loop's timer is re-armed only when the core's
        deadline comes sooner. Every round trip moves the deadline later (each packet sent or
        acknowledged does), and qh3 cancels and schedules a timer handle for each; one left
        armed that fires before the deadline looks again (_handle_timer)."""
        if self.uploads:
            self.before_transmit()
        self._transmit_task = None
        quic = self.tapped
        batches = quic.batches_to_send(now)
        if batches:
            self._send(batches)
        deadline = quic.deadline()
        timer = self._timer
        armed_at = self._timer_at
        if timer is not None and (deadline is None or armed_at is None or deadline < armed_at):
            timer.cancel()
            timer = self._timer = None
        if timer is None and deadline is not None:
            self._timer = self._loop.call_at(deadline, self._handle_timer)
            self._timer_at = deadline

    def _send(self, batches: list[tuple[Any, list[bytes]]]) -> None:
        send_many = self._sendto_many
        if send_many is not None:
            for addr, datagrams in batches:
                send_many(datagrams, addr)
            return
        assert self._transport is not None  # a transport without batches (not Linux)
        for addr, datagrams in batches:
            for data in datagrams:
                self._transport.sendto(data, addr)

    def _handle_timer(self) -> None:
        deadline = self.tapped.deadline()
        if deadline is None or self._timer_at is None or deadline > self._timer_at:
            self._timer = None  # not due: the deadline went, or moved on since armed
            if deadline is not None:
                self._timer = self._loop.call_at(deadline, self._handle_timer)
                self._timer_at = deadline
            return
        super()._handle_timer()

    def error_received(self, exc: Exception) -> None:
        """The socket is connected to the server's address, so a host with nothing on that
        UDP port answers with ICMP and the kernel says so here: the handshake fails now, not
        at the trial's timeout."""
        if isinstance(exc, OSError) and not self.refused.done():
            self.refused.set_result(exc)
