"""One client trial of any workload: a new connection, the workload's requests on it (its
`Driver`), the process's CPU, memory and frames measured over exactly that span, one record.

The driver decides what to request and checks what comes back; this module does the rest the
same way for every workload: the marker, the probes, the timeout (connecting included: a
server that never accepts is a timeout too), the trial header on every request, and the
record's common fields (agent/client/record.py). However a trial fails, it is a record: a
failure before it could start (the page's manifest) is `unrun_record`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from h2.exceptions import H2Error

from agent import __version__, probe
from agent.client.connect import Target, client_tls_context, open_connection
from agent.client.exchange import ClientExchange
from agent.client.options import RunPlan, TrialOptions
from agent.client.record import PHASE_MARKS, ClientRecord
from agent.client.response import Response
from agent.conditions import TrialWatch
from agent.errors import AgentError, BodyMismatchError, FetchError, PeerProtocolError
from agent.event_loop import running_loop_name
from agent.event_trace import trace_name, write_trace
from agent.h2.fastpath import H2Internals
from agent.marker import Marker
from agent.protocols import protocol_spec
from agent.protocols.in_force import SettingsExchange
from agent.traffic import FrameCounts
from agent.transport_counts import merged as merged_transport
from agent.trial_header import TRIAL_HEADER


class TrialConnection(Protocol):
    """What a trial asks of its connection, over HTTP/2 (agent.client.connection) or HTTP/3
    (agent.client.h3)."""

    local_settings: Mapping[str, int]

    @property
    def window_updates_sent(self) -> int | None: ...

    def request(
        self,
        authority: str,
        scheme: str,
        path: str,
        extra_headers: list[tuple[bytes, bytes]],
        *,
        keep_body: bool = False,
        hashed: bool = True,
    ) -> asyncio.Future[Response]: ...

    def open_exchange(
        self,
        method: bytes,
        authority: str,
        scheme: str,
        path: str,
        headers: list[tuple[bytes, bytes]],
        *,
        end_stream: bool,
    ) -> ClientExchange: ...

    async def settings_received(self) -> None: ...

    @property
    def peer_max_concurrent_streams(self) -> int: ...

    def peer_settings(self) -> dict[str, int]: ...

    def settings_exchange(self) -> SettingsExchange: ...

    @property
    def tls_version(self) -> str | None: ...

    def sent_counts(self) -> dict[str, object]: ...

    def received_counts(self) -> dict[str, object]: ...

    def transport_record(self) -> dict[str, object] | None: ...

    def qlog_events(self, start_ns: int, start_wall_ns: int) -> Iterable[Mapping[str, object]]:
        """Its event trace's qlog events (none if untraced), `time` in ms after the trial's
        start, given on both clocks."""
        ...

    @property
    def usable(self) -> bool:
        """Whether a request may still go on it (not ended by either side)."""
        ...

    async def ping(self) -> None:
        """A PING (HTTP/2's frame, QUIC's), waited for until acknowledged."""
        ...

    def wire_bytes(self) -> tuple[int, int] | None:
        """Transport payload bytes sent and received so far, the handshake's included; None
        where they cannot be counted."""
        ...

    @property
    def resumed(self) -> bool:
        """Its handshake resumed an earlier session (the server took the ticket offered)."""
        ...

    @property
    def early_data_accepted(self) -> bool:
        """The server took what the connect sent as 0-RTT early data."""
        ...

    def session_ticket(self) -> object | None:
        """What a later connection may offer to resume this one's session: None before the
        server sent one (or without TLS)."""
        ...

    async def wait_ticket(self) -> None:
        """Until the server's session ticket is in (`session_ticket`)."""
        ...

    async def shut(self) -> None:
        """Close as far as the client's own work goes (the trial's close phase); `close` then
        waits for the rest."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Connected:
    """One connection a trial opened: its connect's start and end on CLOCK_MONOTONIC (the
    clock of the record's `phases`), its time and the process's CPU over it."""

    start_mono_ns: int
    done_mono_ns: int
    connect_s: float
    connect_cpu_s: float


EarlySend = Callable[[TrialConnection], None]
"""What a connect sends as 0-RTT early data, given the connection before its handshake."""


class Connector:
    """How a trial connects, the same way for each of its connections, over the protocol its
    options name. Over TLS and TCP it keeps one TLS context for the trial: a session resumes
    only with the context that made it, and a context per connection would load the CA store
    (milliseconds of CPU) into every connect."""

    def __init__(self, target: Target, options: TrialOptions) -> None:
        self.target = target
        self.options = options
        tls = not options.quic and target.scheme == "https"
        self._context = client_tls_context(options) if tls else None

    async def open(
        self, offer: object | None = None, early: EarlySend | None = None
    ) -> tuple[TrialConnection, Connected]:
        """A connection, timed; resuming `offer` (an earlier connection's `session_ticket()`)
        if given. Over QUIC, `early` sends as 0-RTT early data where the ticket allows it
        (agent.client.h3); TLS over TCP here has no early data (Python's ssl sends none)."""
        start_ns, cpu_s = time.monotonic_ns(), time.process_time()
        connection = await self._open(offer, early)
        done_ns = time.monotonic_ns()
        cpu_s = time.process_time() - cpu_s
        return connection, Connected(start_ns, done_ns, (done_ns - start_ns) / 1e9, cpu_s)

    async def _open(self, offer: object | None, early: EarlySend | None) -> TrialConnection:
        target, options = self.target, self.options
        if not options.quic:
            session = offer if isinstance(offer, ssl.SSLSession) else None
            return await open_connection(target, options, self._context, session)
        from qh3.tls import SessionTicket  # noqa: PLC0415

        from agent.client.h3 import open_h3_connection  # noqa: PLC0415  (qh3: the h3 extra)

        ticket = offer if isinstance(offer, SessionTicket) else None
        windows = options.quic_windows()
        return await open_h3_connection(target, options, windows, offer=ticket, early=early)


class TrialSession:
    """A trial's view of its connection: requests on the target, each tagged with the trial.
    A workload that connects again (the periodic one's new connection per exchange, or its
    kept one lost) does so through `reconnect`, the trial's own connect path."""

    def __init__(
        self,
        connection: TrialConnection,
        target: Target,
        trial_id: str,
        *,
        connector: Connector | None = None,
        connected: Connected | None = None,
    ) -> None:
        """`connector`: how `reconnect` connects (the trial's); `connected`: how `connection`
        was opened, where the trial timed it."""
        self.connection = connection
        self.target = target
        self.trial_id = trial_id
        self.connector = connector or Connector(target, TrialOptions())
        # Every connection the trial opened and timed, the first (its connect phase) first.
        self.connections = [] if connected is None else [connected]
        # The newest session ticket of the trial's connections, which `reconnect` offers.
        self._ticket: object | None = None
        # What the connections `reconnect` closed sent and received, together, the last of
        # them `_counted`.
        self._closed_counts = (FrameCounts.empty(), FrameCounts.empty())
        self._closed_transport: dict[str, object] | None = None
        self._counted: TrialConnection | None = None
        self._extra = [(TRIAL_HEADER.encode(), trial_id.encode())]

    def sent_counts(self) -> dict[str, object]:
        """What the trial's connections sent, together (the record's `sent`)."""
        return self._with_current(self._closed_counts[0], self.connection.sent_counts())

    def received_counts(self) -> dict[str, object]:
        """What the trial's connections received, together (the record's `received`)."""
        return self._with_current(self._closed_counts[1], self.connection.received_counts())

    def transport_record(self) -> dict[str, object] | None:
        """The transport's counts over the trial's connections (agent.transport_counts);
        None over HTTP/2, whose transport adds nothing to the record."""
        if self.connection is self._counted:
            return self._closed_transport
        return merged_transport(self._closed_transport, self.connection.transport_record())

    def _with_current(self, closed: FrameCounts, current: dict[str, object]) -> dict[str, object]:
        if self.connection is self._counted:
            return closed.to_dict()
        return closed.plus(FrameCounts.of(current)).to_dict()

    async def reconnect(self, resume: bool = False, early: EarlySend | None = None) -> Connected:
        """Close the current connection and open another, timed; its requests are the trial's
        from now on. `resume`: offer the newest session ticket of the trial's connections (a
        full handshake where none came), with `early` as Connector.open takes it. A connect
        that fails raises as the first one would, the closed connection staying current."""
        closing = self.connection
        self._ticket = closing.session_ticket() or self._ticket
        await closing.close()
        if closing is not self._counted:  # a connect that failed left it current: once only
            self._counted = closing
            sent, received = self._closed_counts
            self._closed_counts = (
                sent.plus(FrameCounts.of(closing.sent_counts())),
                received.plus(FrameCounts.of(closing.received_counts())),
            )
            self._closed_transport = merged_transport(
                self._closed_transport, closing.transport_record()
            )
        offer = self._ticket if resume else None
        self.connection, connected = await self.connector.open(offer, early)
        self.connections.append(connected)
        return connected

    def request(
        self, path: str, keep_body: bool = False, hashed: bool = True
    ) -> asyncio.Future[Response]:
        """GET `path`; the future's response has its body's size and sha256 (not `hashed`:
        its size alone), and the body itself with `keep_body`."""
        target = self.target
        return self.connection.request(
            target.authority, target.scheme, path, self._extra, keep_body=keep_body, hashed=hashed
        )

    def exchange(
        self,
        method: bytes,
        path: str,
        headers: Sequence[tuple[bytes, bytes]] = (),
        end_stream: bool = True,
        *,
        on: TrialConnection | None = None,
    ) -> ClientExchange:
        """Open a stream, tagged with the trial like every request; `end_stream=False` keeps
        it open for `send()`. `headers` may carry `:protocol` (RFC 8441 extended CONNECT: the
        stream opens once the server's SETTINGS are in, and the exchange fails with
        ExchangeRefused if they do not enable it). `on`: a connection still in its handshake
        (a 0-RTT request, Connector.open's `early`), else the session's."""
        target = self.target
        return (on or self.connection).open_exchange(
            method,
            target.authority,
            target.scheme,
            path,
            [*headers, *self._extra],
            end_stream=end_stream,
        )

    def send_call(
        self,
        method: bytes,
        path: str,
        headers: Sequence[tuple[bytes, bytes]] = (),
        body: bytes = b"",
        *,
        on: TrialConnection | None = None,
    ) -> ClientExchange:
        """`call`'s request, sent (its body uploaded under the server's windows, with its
        content-length unless `headers` has one); `response` takes its answer."""
        if body and not any(name == b"content-length" for name, _value in headers):
            headers = [*headers, (b"content-length", str(len(body)).encode())]
        exchange = self.exchange(method, path, headers, end_stream=not body, on=on)
        if body:
            exchange.send(body, end_stream=True)
        return exchange

    async def call(
        self,
        method: bytes,
        path: str,
        headers: Sequence[tuple[bytes, bytes]] = (),
        body: bytes = b"",
    ) -> Response:
        """One whole request with `body` and its whole response, body kept, trailers set. A
        server that answers early (a 413, say) and resets the rest of the upload still gives
        its response."""
        return await self.response(self.send_call(method, path, headers, body))

    @staticmethod
    async def response(exchange: ClientExchange) -> Response:
        """The whole response of an exchange `send_call` sent."""
        status, response_headers = await exchange.response_head()
        body_received = bytearray()
        path = exchange.path
        response = Response(path, exchange.t_request_ns, status=status, body=body_received)
        response.headers = dict(response_headers)
        while (chunk := await exchange.receive()) is not None:
            response.size_bytes += len(chunk)
            response.digest.update(chunk)
            body_received += chunk
        response.t_headers_ns = exchange.t_headers_ns
        response.t_end_ns = exchange.t_end_ns
        trailers = exchange.trailers
        response.trailers = dict(trailers) if trailers is not None else None
        return response

    async def concurrency_limit(self) -> int:
        """How many streams the server lets this client open at once (its first SETTINGS)."""
        await self.connection.settings_received()
        return max(1, self.connection.peer_max_concurrent_streams)

    async def request_all(
        self, paths: Sequence[str], check: Callable[[Response], None], hashed: bool = True
    ) -> None:
        """GET every path, as many at once as the server allows, in order; `check` each
        response as it completes (its exception ends the trial); bodies hashed as `request`
        says."""
        limit = await self.concurrency_limit()
        queue = list(reversed(paths))
        running: set[asyncio.Future[Response]] = set()
        while queue or running:
            while queue and len(running) < limit:
                running.add(self.request(queue.pop(), hashed=hashed))
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                check(future.result())


def check_body(response: Response, size_bytes: int, sha256: str | None, source: str) -> None:
    """Status 200 and exactly the expected body (its size alone where `sha256` is None), else
    the trial fails naming the path and what the expectation came from (`source`: "manifest",
    "blob")."""
    if response.status != 200:
        raise FetchError(f"GET {response.path} answered {response.status}")
    if response.size_bytes != size_bytes:
        raise BodyMismatchError(
            f"GET {response.path}: {response.size_bytes} bytes, {source} says {size_bytes}"
        )
    if sha256 is not None and response.digest.hexdigest() != sha256:
        raise BodyMismatchError(f"GET {response.path}: sha256 differs from the {source}")


class Driver(Protocol):
    """One workload's part of one trial."""

    @property
    def responses(self) -> list[Response]:
        """Every response it received and judged, in that order."""
        ...

    async def run(self, session: TrialSession) -> None:
        """Make the trial's requests and check the responses; an AgentError fails the trial."""
        ...

    def metrics(self) -> dict[str, object]:
        """Exactly the workload spec's fields, None where the trial failed before them."""
        ...

    def extra(self, start_ns: int) -> dict[str, object]:
        """The workload's own top-level record fields (times relative to `start_ns`)."""
        ...


async def run_trial(
    target: Target,
    options: TrialOptions,
    driver: Driver,
    *,
    workload: str,
    engine: str,
    params: Mapping[str, object],
    trial_id: str,
    repetition: int,
    marker: Marker,
) -> ClientRecord:
    """The trial's record, failed or not."""
    session: TrialSession | None = None
    error: str | None = None
    error_code: Mapping[str, object] | None = None
    tls_version: str | None = None

    async def connect_and_run() -> None:
        nonlocal session, tls_version
        connector = Connector(target, options)
        connection, connected = await connector.open()
        session = TrialSession(
            connection, target, trial_id, connector=connector, connected=connected
        )
        tls_version = connection.tls_version
        await driver.run(session)

    if not options.quic:
        # The fast path's one check of h2's internals (agent.h2.fastpath), made once per process:
        # here, outside the measured window, rather than by the first trial's connection.
        H2Internals.available()
    conditions = TrialWatch()  # the node's state, read outside the measured window
    raised_ns = marker.raise_line()
    window = probe.ProbeWindow()
    try:
        await asyncio.wait_for(connect_and_run(), options.timeout_s)
    except TimeoutError:
        stage = "trial" if session is not None else "trial's connection"
        error = f"timeout: the {workload} {stage} took longer than {options.timeout_s:g} s"
    except AgentError as exc:
        error = str(exc)
        if isinstance(exc, PeerProtocolError) and exc.error_code is not None:
            error_code = exc.error_code.to_dict()
    except H2Error as exc:  # h2 refused what we asked of it, e.g. a stream the peer forbids
        error = f"HTTP/2: {type(exc).__name__}: {exc}"
    span = window.close()
    connection = None if session is None else session.connection
    first = session.connections[0] if session is not None else None
    connect_done_ns = 0 if first is None else first.done_mono_ns
    if connection is not None:
        # Inside the marker's window: closing is the trial's third phase.
        await connection.shut()
    close_done_ns = time.monotonic_ns()
    lowered_ns = marker.lower_line()
    node = conditions.end()
    await _close(connection, options, trial_id, span.start)
    start_ns = span.start.t_mono_ns
    responses = driver.responses
    ends = [r.t_end_ns for r in responses if r.t_end_ns]
    end_ns = max(ends) if error is None and ends else span.end.t_mono_ns
    firsts = [r.t_headers_ns for r in responses if r.t_headers_ns]
    first_ns = min(firsts) if firsts else None
    marks = (raised_ns, connect_done_ns, first_ns, end_ns, close_done_ns, lowered_ns)
    exchange = connection.settings_exchange() if connection else None
    return ClientRecord(
        ok=error is None,
        error=error,
        trial_id=trial_id,
        repetition=repetition,
        url=target.url,
        workload=workload,
        engine=engine,
        agent_version=__version__,
        protocol=options.protocol,
        tls=protocol_spec(options.protocol).tls,
        settings=dict(connection.local_settings) if connection else {},
        flow_control=options.flow.record(options.initial_window_size),
        peer_settings=connection.peer_settings() if connection else {},
        response_s=(end_ns - start_ns) / 1e9,
        ttfb_s=(first_ns - start_ns) / 1e9 if first_ns is not None else None,
        cpu_user_s=span.cpu_user_s,
        cpu_sys_s=span.cpu_sys_s,
        cpu_s=span.cpu_s,
        cpu_pct=span.cpu_pct,
        rss_peak_bytes=span.rss_peak_bytes,
        rss_peak_is_fetch=span.rss_peak_is_window,
        sent=session.sent_counts() if session else {},
        received=session.received_counts() if session else {},
        window_updates_sent=connection.window_updates_sent if connection else 0,
        t_wall_start_ns=span.start.t_wall_ns,
        t_wall_end_ns=span.start.t_wall_ns + (end_ns - start_ns),
        t_mono_start_ns=start_ns,
        t_mono_end_ns=end_ns,
        probe_overhead_s=window.overhead_s,
        cpu_pin=options.cpu_pin,
        marker=marker.describe(),
        params=params,
        metrics=driver.metrics(),
        extra=driver.extra(start_ns),
        conditions=node.to_dict(),
        connect_s=None if first is None else first.connect_s,
        connect_cpu_s=None if first is None else first.connect_cpu_s,
        tls_version=tls_version,
        transport=session.transport_record() if session else None,
        event_loop=running_loop_name(),
        error_code=error_code,
        phases=_phases(marks) if error is None else None,
        settings_announced=exchange.announced if exchange else None,
        settings_received=exchange.received if exchange else None,
    )


async def _close(
    connection: TrialConnection | None,
    options: TrialOptions,
    trial_id: str,
    start: probe.ProbeSample,
) -> None:
    """The connection closed, then its event trace written (if asked): after the measured
    window and the marker's edge, so what a trace costs the trial is the tracing alone."""
    if connection is not None:
        await connection.close()
    if options.events_dir is None:
        return
    write_trace(
        options.events_dir / trace_name(trial_id, "client"),
        connection.qlog_events(start.t_mono_ns, start.t_wall_ns) if connection else (),
        vantage_point="client",
        trial_id=trial_id,
        reference_wall_ns=start.t_wall_ns,
        max_bytes=options.events_max_bytes,
    )


def _phases(marks: Sequence[int | None]) -> dict[str, int]:
    """The record's `phases` from its marks in PHASE_MARKS order, those it lacks left out."""
    return {name: at for name, at in zip(PHASE_MARKS, marks, strict=True) if at is not None}


def unrun_record(
    plan: RunPlan,
    *,
    trial_id: str,
    repetition: int,
    error: str,
    metric_names: Sequence[str],
    marker: str,
) -> ClientRecord:
    """The record of a trial that failed before it could start (the page's manifest could not
    be had): `ok` false, the reason, nothing measured (zero times, null counts and metrics)."""
    now = probe.sample()
    options = plan.options
    return ClientRecord(
        ok=False,
        error=error,
        trial_id=trial_id,
        repetition=repetition,
        url=plan.url,
        workload=plan.workload,
        engine=plan.engine,
        agent_version=__version__,
        protocol=options.protocol,
        tls=protocol_spec(options.protocol).tls,
        settings={},
        flow_control=options.flow.record(options.initial_window_size),
        peer_settings={},
        response_s=0.0,
        ttfb_s=None,
        cpu_user_s=0.0,
        cpu_sys_s=0.0,
        cpu_s=0.0,
        cpu_pct=0.0,
        rss_peak_bytes=probe.peak_rss_bytes(),
        rss_peak_is_fetch=False,
        sent=None,
        received=None,
        window_updates_sent=None,
        t_wall_start_ns=now.t_wall_ns,
        t_wall_end_ns=now.t_wall_ns,
        t_mono_start_ns=now.t_mono_ns,
        t_mono_end_ns=now.t_mono_ns,
        probe_overhead_s=0.0,
        cpu_pin=options.cpu_pin,
        marker=marker,
        params=plan.params,
        metrics=dict.fromkeys(metric_names),
        extra={},
    )
