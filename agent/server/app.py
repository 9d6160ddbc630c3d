"""The server process: listening socket(s), shared state across connections, the connection
cap, signals, trial log.

With a settings file, SIGHUP makes the server take the SETTINGS in it for the connections made
from then on (a warm sweep changes its setting without a new process: a restart costs about a
quarter of a second through a local node's anchor, seconds on a Pi). The file is JSON,
{"generation": N, "settings": ["NAME=VALUE", ...]}, checked as `--setting` is; the server says
{"event": "settings", "generation": N, ...} on stderr once they apply, or
{"event": "settings_refused", "error": ...} and keeps the ones it had.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import signal
import ssl
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from pathlib import Path

from h2.settings import SettingCodes

from agent import probe
from agent.conditions import Host, TrialWatch
from agent.cpu_peak import CpuSampler
from agent.errors import AgentError, UsageError
from agent.event_loop import running_loop_name
from agent.event_trace import TraceWriter
from agent.h2.settings import parse_settings, to_h2
from agent.limits import ConnectionLimits
from agent.protocols import DEFAULT_PROTOCOL, protocol_spec
from agent.protocols.in_force import SettingsExchange
from agent.server.connection import ServerConnection
from agent.server.control import announced, open_control
from agent.server.handler import Handler, Reply, Streamed
from agent.server.host import HostedConnection
from agent.server.ledger import Note, TrialLedger, TrialRecord
from agent.server.listener import Listener, listen
from agent.server.request import Request
from agent.traffic import FrameCounts
from agent.transport_counts import merged as merged_transport
from agent.trial_log import TrialLog
from agent.workloads import DEFAULT_KIND

log = logging.getLogger("h2iot.server")

# After SIGTERM, streams in flight get this long to finish before the process exits anyway.
SHUTDOWN_GRACE_S = 30.0


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8443
    settings: dict[str, int] = field(default_factory=dict)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    trial_log: Path | None = None
    workload: str = DEFAULT_KIND  # the kind whose handler is mounted, named in every trial record
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    settings_file: Path | None = None  # read on SIGHUP: new SETTINGS for new connections
    protocol: str = DEFAULT_PROTOCOL  # agent.protocols: whose ALPN a TLS handshake offers
    traces: TraceWriter | None = None  # each trial's HTTP/2 frames, written as it leaves
    control_port: int | None = None  # listen for trial-control messages (agent.server.control)


class ServerApp:
    """The server's shared state: the workload's handler, the connections, the trial ledger and
    its log. Each connection sees it as its `ConnectionHost` (agent.server.host)."""

    def __init__(self, options: ServerOptions, trial_log: TrialLog, handler: Handler) -> None:
        self.options = options
        self.handler = handler
        self.ledger = TrialLedger(options.workload)
        self.cpu_peaks = CpuSampler()
        # Each open trial's node conditions (agent.conditions), read when it opens and closes.
        self._node = Host()
        self._conditions: dict[str, TrialWatch] = {}
        self.h2_settings = self._h2_settings(options.settings)
        self.limits = options.limits
        # Connections not yet closing (shed ones leave at once, the others when lost), and how
        # many sockets connections hold (made and not yet lost, closing ones included).
        self.connections: set[HostedConnection] = set()
        self.open_sockets = 0
        self.setting_up = 0  # accepted by the listener, not yet a connection
        self.hostile_connections = 0
        self._next_id = 0
        self._trial_log = trial_log
        # An open trial's transport over the connections it left so far
        # (agent.transport_counts) and its last one's settings, written with its record once
        # it closes (a lingering one's too: agent.server.ledger).
        self._left: dict[str, tuple[Mapping[str, object] | None, SettingsExchange | None]] = {}
        # The trial a client bracketed by control messages, between its begin and end
        # (agent.server.control): a request without the trial header is counted to it.
        self.controlled_trial: str | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    def _h2_settings(self, settings: Mapping[str, int]) -> dict[SettingCodes, int]:
        return {
            # h2's own defaults for a server, made explicit so they are what we report.
            SettingCodes.MAX_CONCURRENT_STREAMS: 100,
            SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
            **to_h2(settings),
            **handler_settings(self.handler),
        }

    def reload_settings(self, path: Path) -> None:
        """The SETTINGS in `path` (the module's docstring has its form) for connections made
        from now on; open ones keep theirs. A file that does not check out changes nothing."""
        try:
            document = json.loads(path.read_text())
            generation = int(document["generation"])
            settings = parse_settings(document["settings"])
        except (OSError, ValueError, KeyError, TypeError, AgentError) as exc:
            event: dict[str, object] = {"event": "settings_refused", "error": f"{path}: {exc}"}
        else:
            self.h2_settings = self._h2_settings(settings)
            event = {"event": "settings", "generation": generation, "settings": settings}
        print(json.dumps(event), file=sys.stderr, flush=True)

    def next_connection_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def new_connection(self) -> ServerConnection:
        return ServerConnection(self, self.next_connection_id(), traces=self.options.traces)

    # ConnectionHost ----------------------------------------------------------------------------

    def handle(self, request: Request) -> Reply | Streamed:
        return self.handler.handle(request)

    def connection_opened(self, connection: HostedConnection) -> None:
        self.connections.add(connection)
        self.open_sockets += 1
        # A connection made on a transport of the tests' own was never accepted here.
        self.setting_up = max(0, self.setting_up - 1)
        self._idle.clear()

    def connection_closed(self, connection: HostedConnection, failed: bool) -> None:
        self.connections.discard(connection)
        self.open_sockets -= 1
        self.hostile_connections += failed
        if not self.open_sockets:
            self._idle.set()

    # Admission (agent.server.listener) ----------------------------------------------------------

    def sockets_in_use(self) -> int:
        return self.setting_up + self.open_sockets

    def accepted(self) -> None:
        self.setting_up += 1

    def setup_failed(self) -> None:
        self.setting_up -= 1

    def make_room(self, wanted: int) -> int:
        """Have `wanted` connections closing (those closing already count), closing the
        longest idle sheddable ones; how many are closing now."""
        closing = self.open_sockets - len(self.connections)
        candidates = [c for c in self.connections if c.sheddable]
        victims = heapq.nsmallest(
            max(0, wanted - closing), candidates, key=attrgetter("last_progress_s")
        )
        for victim in victims:
            self.connections.discard(victim)
            victim.shed()
        return closing + len(victims)

    def trial_request(self, trial_id: str, connection_id: int) -> None:
        if not self.ledger.is_open(trial_id):
            self.close_lingering()
            # Before the trial's span; the counters only, on the request path.
            self._conditions[trial_id] = TrialWatch(self._node, instant_start=False)
            # Only a trial that runs alone may reset the process's peak-RSS mark.
            reset = not self.ledger.open_trials and probe.reset_peak_rss()
            self.cpu_peaks.open(trial_id)
            # The span's start, sampled once: the trial's later requests need none.
            self.ledger.open(trial_id, probe.sample(), rss_reset=reset)
        self.ledger.request(trial_id, connection_id)

    def control_begin(self, trial_id: str) -> None:
        self.controlled_trial = trial_id

    def control_end(self, trial_id: str) -> None:
        """The client ended the trial it bracketed: its record is written once no connection
        carries it (now, if none does)."""
        if self.controlled_trial == trial_id:
            self.controlled_trial = None
        record = self.ledger.end(trial_id, probe.peak_rss_bytes())
        if record is not None:
            self._closed(record, *self._left.pop(trial_id, (None, None)))

    def close_lingering(self) -> None:
        """Write the records of the trials kept open for a next connection that did not come
        (agent.server.ledger): another trial begins, or the server stops."""
        for lingered in self.ledger.close_lingering(probe.peak_rss_bytes()):
            self._closed(lingered, *self._left.pop(lingered.trial_id, (None, None)))

    def trial_responses_done(self, trial_ids: Sequence[str]) -> None:
        now = probe.sample()
        for trial_id in trial_ids:
            self.ledger.response_done(trial_id, now)

    def trial_stream_reset(self, trial_id: str) -> None:
        self.ledger.stream_reset(trial_id)

    def trial_noted(self, trial_id: str, note: Note) -> None:
        self.ledger.note(trial_id, note)

    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        transport: Mapping[str, object] | None = None,
        *,
        settings: SettingsExchange | None,
    ) -> None:
        record = self.ledger.detach(trial_id, connection_id, sent, received, probe.peak_rss_bytes())
        # Over the trial's connections so far: a trial of several (a connection per exchange)
        # counts its transport's events over all of them.
        transport = merged_transport(self._left.pop(trial_id, (None, None))[0], transport)
        if record is not None:
            self._closed(record, transport, settings)
        else:
            self._left[trial_id] = (transport, settings)

    def _closed(
        self,
        record: TrialRecord,
        transport: Mapping[str, object] | None,
        settings: SettingsExchange | None,
    ) -> None:
        """A trial closed: its record written with its CPU peak, and the transport and
        settings of its last connection (a trial of several connections records that one's)."""
        self._write_record(
            replace(
                record,
                cpu_peak_pct=self.cpu_peaks.close(record.trial_id),
                transport=transport,
                settings_announced=None if settings is None else settings.announced,
                settings_received=None if settings is None else settings.received,
            )
        )

    def _write_record(self, record: TrialRecord) -> None:
        watch = self._conditions.pop(record.trial_id, None)
        conditions = None if watch is None else watch.end().to_dict()
        line = {**record.to_dict(), "conditions": conditions}
        self._trial_log.append(line)

    async def drain(self) -> None:
        for connection in list(self.connections):
            connection.drain()
        try:
            await asyncio.wait_for(self._idle.wait(), SHUTDOWN_GRACE_S)
        except TimeoutError:
            log.warning(
                "shutdown: %d connections still open after %.0f s; closing them",
                len(self.connections),
                SHUTDOWN_GRACE_S,
            )


def handler_settings(handler: Handler) -> dict[SettingCodes, int]:
    """The handler's `extra_settings` (canonical names, e.g. enable_connect_protocol for RFC
    8441) as h2's codes; names h2 does not know are the handler's bug."""
    extra: Mapping[str, int] = getattr(handler, "extra_settings", {})
    codes: dict[SettingCodes, int] = {}
    for name, value in extra.items():
        try:
            codes[SettingCodes[name.upper()]] = value
        except KeyError:
            raise UsageError(
                f"handler {type(handler).__name__}: unknown HTTP/2 setting {name!r} in its"
                " extra_settings"
            ) from None
    return codes


# TLS 1.3 session tickets sent after each full handshake (OpenSSL's default, made explicit: a
# client resuming takes one; stateless, encrypted with the context's key, so they resume only on
# this process, and OpenSSL's default lifetime of 7200 s).
_TICKETS = 2


def tls_context(cert: Path, key: Path, alpn: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.num_tickets = _TICKETS
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot load TLS certificate {cert} / key {key}: {exc}") from None
    context.set_alpn_protocols([alpn])
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


async def serve(options: ServerOptions, handler: Handler) -> int:
    """Serve until SIGTERM/SIGINT, then GOAWAY every connection and finish in-flight streams."""
    context = None
    if options.tls_cert is not None or options.tls_key is not None:
        if options.tls_cert is None or options.tls_key is None:
            raise UsageError("--tls needs both --cert and --key")
        protocol = protocol_spec(options.protocol)
        assert protocol.alpn is not None, f"{protocol.name} has no certificate: no ALPN"
        context = tls_context(options.tls_cert, options.tls_key, protocol.alpn)
    trial_log = TrialLog(options.trial_log)
    app = ServerApp(options, trial_log, handler)
    loop = asyncio.get_running_loop()
    sockets = listen(options.host, options.port)
    listener = Listener(sockets, app.new_connection, options.limits, app, tls=context)
    listener.start()
    control = await open_control(app, options.host, options.control_port)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if options.settings_file is not None:
        loop.add_signal_handler(signal.SIGHUP, app.reload_settings, options.settings_file)
    bound = ", ".join(f"{s.getsockname()[0]}:{s.getsockname()[1]}" for s in sockets)
    scheme = "https" if context else "http"
    log.info("serving on %s (%s)", bound, scheme)
    print(
        json.dumps(
            {
                "event": "listening",
                "scheme": scheme,
                "address": bound,
                "port": sockets[0].getsockname()[1],
                "event_loop": running_loop_name(),
                **options.limits.to_dict(),
                "accept_log_interval_s": listener.log_interval_s,
                **announced(control),
            }
        ),
        file=sys.stderr,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        listener.close()
        if control is not None:
            control.close()
        await app.drain()
        app.close_lingering()
        trial_log.close()
    return 0
