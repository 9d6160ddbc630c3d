"""The periodic workload's client: `count` exchanges on the schedule (agent.workloads.periodic
.schedule), each a GET or a POST of /periodic/<response_bytes>, over the trial's kept
connection or a new one per exchange (the trial's own connect path,
agent.client.trial.TrialSession.reconnect), every one recorded (agent.workloads.periodic
.record).

Under `keep` the connection idles between exchanges, PINGed every keepalive_s with
`keepalive = "ping"`; a connection the server ended meanwhile (its idle timeout) is opened
again before the next exchange and counted as a reconnect. An exchange that fails is recorded
with its error and the next one still runs at its time; the trial fails at the end, naming the
first failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from http import HTTPStatus

from h2.exceptions import H2Error

from agent.client.connect import Target
from agent.client.exchange import ClientExchange
from agent.client.options import RunPlan
from agent.client.response import Response
from agent.client.run import Prepared
from agent.client.trial import Connected, TrialConnection, TrialSession, check_body
from agent.errors import AgentError, FetchError
from agent.trial_header import TRIAL_CONTINUES_HEADER
from agent.workloads.bodies import blob_body
from agent.workloads.periodic.protocol import PATH_PREFIX
from agent.workloads.periodic.record import (
    Exchange,
    Keepalive,
    early_accepted,
    handshake_of,
    metrics,
)
from agent.workloads.periodic.schedule import Schedule, lateness_s

_NS = 1_000_000_000
# RFC 8470: a request sent in early data and refused there, to send again after the handshake.
_TOO_EARLY = HTTPStatus.TOO_EARLY
# On every exchange but the last: the server keeps the trial open across connections.
_CONTINUES = ((TRIAL_CONTINUES_HEADER.encode(), b"1"),)


@dataclass(frozen=True)
class PeriodicPlan:
    """A trial's params as the driver uses them."""

    schedule: Schedule
    path: str
    method: bytes
    request_body: bytes
    response_bytes: int
    connection: str
    keepalive_s: float | None  # None: no keepalive PINGs


async def prepare(plan: RunPlan, target: Target) -> Prepared:
    params = plan.params
    response_bytes = int(params["response_bytes"])
    method = str(params["method"])
    periodic = PeriodicPlan(
        schedule=Schedule(
            int(params["count"]), float(params["interval_s"]), float(params["jitter_s"])
        ),
        path=f"{target.path.rstrip('/')}{PATH_PREFIX}{response_bytes}",
        method=method.encode(),
        # Built once, outside any timed trial.
        request_body=blob_body(int(params["request_bytes"])) if method == "POST" else b"",
        response_bytes=response_bytes,
        connection=str(params["connection"]),
        keepalive_s=float(params["keepalive_s"]) if params["keepalive"] == "ping" else None,
    )
    return Prepared(params, lambda: PeriodicDriver(periodic))


class PeriodicDriver:
    def __init__(self, plan: PeriodicPlan) -> None:
        self.plan = plan
        self.responses: list[Response] = []
        self.exchanges: list[Exchange] = []
        self.reconnects = 0
        self.keepalive = Keepalive()

    async def run(self, session: TrialSession) -> None:
        plan = self.plan
        start_ns = session.connections[0].start_mono_ns
        for index, due_after_ns in enumerate(plan.schedule.due_ns(session.trial_id)):
            due_ns = start_ns + due_after_ns
            if index:
                await self._idle_until(session, due_ns)
            self.exchanges.append(await self._exchange(session, index, due_ns))
        failed = [e for e in self.exchanges if not e.ok]
        if failed:
            raise FetchError(
                f"{len(failed)} of {len(self.exchanges)} periodic exchanges failed; the first, "
                f"#{failed[0].index}: {failed[0].error}"
            )

    async def _idle_until(self, session: TrialSession, due_ns: int) -> None:
        """Wait for `due_ns`, PINGing the kept connection every keepalive_s meanwhile; a
        connection to resume first waits for its session ticket, within that time."""
        if self.plan.connection == "resume":
            left_s = (due_ns - time.monotonic_ns()) / _NS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(session.connection.wait_ticket(), max(0.0, left_s))
        period_s = self.plan.keepalive_s if self.plan.connection == "keep" else None
        while True:
            left_s = (due_ns - time.monotonic_ns()) / _NS
            if period_s is None or left_s <= period_s:
                break
            await asyncio.sleep(period_s)
            if session.connection.usable:
                await self._ping(session)
        if left_s > 0:
            await asyncio.sleep(left_s)

    async def _ping(self, session: TrialSession) -> None:
        connection = session.connection
        before = connection.wire_bytes()
        try:
            await connection.ping()
        except AgentError:
            return  # the connection ended: the next exchange connects again, counted there
        after = connection.wire_bytes()
        wire = 0 if before is None or after is None else sum(after) - sum(before)
        self.keepalive = Keepalive(self.keepalive.pings + 1, self.keepalive.wire_bytes + wire)

    async def _exchange(self, session: TrialSession, index: int, due_ns: int) -> Exchange:
        plan = self.plan
        headers = () if index == plan.schedule.count - 1 else _CONTINUES
        early: list[ClientExchange] = []  # the request sent as 0-RTT early data, if it was
        connected: Connected | None = None
        error: str | None = None
        if index == 0:
            connected = session.connections[0]
        elif plan.connection != "keep" or not session.connection.usable:
            self.reconnects += plan.connection == "keep"

            def send_early(connection: TrialConnection) -> None:
                early.append(session.send_call(*self._request(headers), on=connection))

            try:
                connected = await session.reconnect(
                    resume=plan.connection == "resume", early=send_early
                )
            except AgentError as exc:
                error = str(exc)
        connection = session.connection
        resumed = error is None and connected is not None and connection.resumed
        handshake = handshake_of(connected is not None, resumed, bool(early))
        start_ns = time.monotonic_ns() if connected is None else connected.start_mono_ns
        # A kept connection's exchange counts from its request; a new one's from its connect.
        before = (0, 0) if connected is not None else connection.wire_bytes()
        request_ns = early[0].t_request_ns if early else None
        accepted: bool | None = None
        response: Response | None = None
        if error is None:
            try:
                if early:
                    # Refused in the handshake (qh3 sent it again after), or answered 425.
                    response = await session.response(early[0])
                    accepted = early_accepted(True, connection.early_data_accepted, response.status)
                if response is None or response.status == _TOO_EARLY:
                    response = await session.call(*self._request(headers))
                check_body(response, plan.response_bytes, None, "periodic workload")
            except (AgentError, H2Error) as exc:
                error = str(exc) or type(exc).__name__
        if response is not None:
            self.responses.append(response)
            request_ns = request_ns or response.t_request_ns
        after = connection.wire_bytes() if error is None else None
        wire = (0, 0)
        if before is not None and after is not None:
            wire = (after[0] - before[0], after[1] - before[1])
        end_ns = response.t_end_ns if response is not None and error is None else None
        return Exchange(
            index=index,
            scheduled_mono_ns=due_ns,
            start_mono_ns=start_ns,
            connected_mono_ns=None if connected is None else connected.done_mono_ns,
            request_mono_ns=request_ns,
            response_end_mono_ns=end_ns,
            lateness_s=lateness_s(due_ns, start_ns),
            handshake=handshake,
            early_data_sent=bool(early),
            early_data_accepted=accepted,
            connect_s=None if connected is None else connected.connect_s,
            connect_cpu_s=None if connected is None else connected.connect_cpu_s,
            response_s=None
            if end_ns is None or request_ns is None
            else (end_ns - request_ns) / _NS,
            wire_bytes_sent=wire[0],
            wire_bytes_received=wire[1],
            ok=error is None,
            error=error,
        )

    def _request(
        self, headers: tuple[tuple[bytes, bytes], ...]
    ) -> tuple[bytes, str, tuple[tuple[bytes, bytes], ...], bytes]:
        plan = self.plan
        return plan.method, plan.path, headers, plan.request_body

    def metrics(self) -> dict[str, object]:
        return metrics(self.exchanges, self.reconnects, self.keepalive)

    def extra(self, start_ns: int) -> dict[str, object]:
        return {"exchanges": [exchange.to_dict() for exchange in self.exchanges]}
