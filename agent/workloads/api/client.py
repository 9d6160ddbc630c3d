"""The api workload's client: the reference's JMeter plan as closed-loop virtual users. Each of
`users` users runs at once and loops `loops` times over the 7 list endpoints, one request at a
time, pausing `think_time_ms` after each answer. `connections = "1"` carries every user as
streams of the trial's one connection (at most the server's MAX_CONCURRENT_STREAMS in flight:
users beyond it wait for a stream, as they would in a browser); `"per-user"` opens a
connection for each further user (the trial's own is the first user's), all tagged with the
trial, closed at its end.

A non-2xx answer is an error, counted by status, and the user goes on (as JMeter does); a
broken connection or stream fails the trial. Latencies are kept as floats, not responses'
bodies: a 128-user, 50-loop trial is 44,800 requests."""

from __future__ import annotations

import asyncio
from array import array
from collections import Counter

from agent.client.connect import Target, open_connection
from agent.client.connection import ClientConnection
from agent.client.options import RunPlan, TrialOptions
from agent.client.response import Response
from agent.client.run import Prepared
from agent.client.trial import TrialSession
from agent.workloads.api.parse import PREFIX
from agent.workloads.api.schema import RESOURCES
from agent.workloads.api.spec import PER_USER
from agent.workloads.api.summary import FIELD_NAMES, errors_by_status, summarise


def list_paths(base: str, page_size: int) -> tuple[str, ...]:
    """The 7 list endpoints under the target URL's path."""
    root = base.rstrip("/")
    return tuple(f"{root}{PREFIX}{resource.name}?limit={page_size}" for resource in RESOURCES)


async def prepare(plan: RunPlan, target: Target) -> Prepared:
    params = plan.params
    paths = list_paths(target.path, int(params["page_size"]))
    return Prepared(
        params,
        lambda: ApiDriver(
            paths,
            users=int(params["users"]),
            loops=int(params["loops"]),
            think_time_s=float(params["think_time_ms"]) / 1000,
            per_user=params["connections"] == PER_USER,
            options=plan.options,
        ),
    )


class ApiDriver:
    def __init__(
        self,
        paths: tuple[str, ...],
        *,
        users: int,
        loops: int,
        think_time_s: float,
        per_user: bool,
        options: TrialOptions,
    ) -> None:
        self.paths = paths
        self.users = users
        self.loops = loops
        self.think_time_s = think_time_s
        self.per_user = per_user
        self.options = options
        self.responses: list[Response] = []
        self._latencies_s = array("d")
        self._statuses: Counter[int] = Counter()
        self._body_bytes = 0
        self._first_ns = 0
        self._last_ns = 0
        self._connections = 1
        self._stream_limit = 0

    async def run(self, session: TrialSession) -> None:
        if self.per_user:
            await self._run_per_user(session)
            return
        self._stream_limit = await session.concurrency_limit()
        streams = asyncio.Semaphore(self._stream_limit)
        await self._all_users([session] * self.users, streams)

    async def _run_per_user(self, session: TrialSession) -> None:
        opened: list[ClientConnection] = []
        try:
            # Each user's connection is open before any user starts, as JMeter's threads are.
            for _ in range(self.users - 1):
                opened.append(await open_connection(session.target, self.options))
            self._connections += len(opened)
            sessions = [session] + [
                TrialSession(connection, session.target, session.trial_id) for connection in opened
            ]
            await self._all_users(sessions, None)
        finally:
            await asyncio.gather(*(connection.close() for connection in opened))

    async def _all_users(
        self, sessions: list[TrialSession], streams: asyncio.Semaphore | None
    ) -> None:
        tasks = [asyncio.ensure_future(self._user(s, streams)) for s in sessions]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _user(self, session: TrialSession, streams: asyncio.Semaphore | None) -> None:
        for _ in range(self.loops):
            for path in self.paths:
                if streams is None:
                    response = await session.request(path)
                else:
                    async with streams:
                        response = await session.request(path)
                self._record(response)
                if self.think_time_s:
                    await asyncio.sleep(self.think_time_s)

    def _record(self, response: Response) -> None:
        # Only what the trial's record needs stays: a response's headers are dropped.
        response.headers = {}
        self.responses.append(response)
        self._statuses[response.status] += 1
        self._latencies_s.append((response.t_end_ns - response.t_request_ns) / 1e9)
        self._body_bytes += response.size_bytes
        if not self._first_ns or response.t_request_ns < self._first_ns:
            self._first_ns = response.t_request_ns
        self._last_ns = max(self._last_ns, response.t_end_ns)

    def metrics(self) -> dict[str, object]:
        if not self.responses:
            return dict.fromkeys(FIELD_NAMES)
        span_s = (self._last_ns - self._first_ns) / 1e9
        return summarise(self._latencies_s, self._statuses, self._body_bytes, span_s)

    def extra(self, start_ns: int) -> dict[str, object]:
        return {
            "errors_by_status": errors_by_status(self._statuses),
            "connections": self._connections,
            "stream_limit": self._stream_limit or None,
            "body_bytes": self._body_bytes,
        }
