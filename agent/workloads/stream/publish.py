"""A subscription's publisher: items on schedule into one stream, each through the transport's
`frame`, under the backpressure policy (agent.workloads.stream.schedule). The I/O shell around
the schedule's pure rules."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from agent.workloads.stream.item import DoublePool, StreamEnd, Tune
from agent.workloads.stream.schedule import Backpressure, Schedule, Verdict, verdict
from agent.workloads.stream.subscription import Subscription


class Sink(Protocol):
    """Where a publisher's bytes go: a server exchange (agent.server.exchange)."""

    @property
    def buffered_bytes(self) -> int: ...
    def send(self, data: bytes | memoryview, end_stream: bool = False) -> None: ...
    async def drain(self, low_water_bytes: int = 0) -> None: ...


class Publisher:
    """How this server publishes: its doubles, its backpressure policy and bound."""

    def __init__(self, pool: DoublePool, policy: Backpressure, buffer_bytes: int) -> None:
        self.pool = pool
        self.policy = policy
        self.buffer_bytes = buffer_bytes

    async def run(
        self,
        sink: Sink,
        subscription: Subscription,
        frame: Callable[[Tune], bytes],
        first_seq: int = 0,
    ) -> StreamEnd:
        """Every item of the subscription from `first_seq` on, then one period of quiet; its
        counts (`published` is the subscription's, items 0..n-1, whatever `first_seq`). Under
        `drop` the publisher keeps the schedule (late items go out at once, and the bound
        drops what the subscriber cannot take); under `block`, once more than a period late,
        it shifts its timeline instead of sending what it missed in a burst. Item `first_seq`
        is due at once: a resumed subscription (SSE's Last-Event-ID) gets the items it missed
        at rate_hz from now, not as a burst. Raises ExchangeClosed if the subscriber goes
        away."""
        loop = asyncio.get_running_loop()
        # Before the timeline starts: the first subscription to a larger payload would
        # otherwise publish its first items late.
        self.pool.reserve(subscription.payload_doubles)
        schedule = Schedule(subscription.rate_hz, subscription.duration_s)
        period_s = 1.0 / subscription.rate_hz
        start = loop.time()
        dropped = 0
        for seq in range(first_seq, schedule.items):
            delay = start + schedule.due_s(seq - first_seq) - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif self.policy == "block" and -delay > period_s:
                start -= delay
            decided = verdict(self.policy, sink.buffered_bytes, self.buffer_bytes)
            if decided is Verdict.DROP:
                dropped += 1
                continue
            if decided is Verdict.WAIT:
                await sink.drain(self.buffer_bytes)
            item = self.pool.item(seq, time.time_ns(), dropped, subscription.payload_doubles)
            sink.send(frame(item))
        quiet = start + schedule.due_s(schedule.items - first_seq) - loop.time()
        if quiet > 0:
            await asyncio.sleep(quiet)
        return StreamEnd(schedule.items, dropped)
