"""`h2iot-agent serve --workload api --engine hypercorn`: the ecosystem's production stack,
hypercorn serving the Starlette app (agent.workloads.api.asgi) over HTTP/2, in the agent's
process, over the same database and data layer as the agent's own server.

Hypercorn cannot see the trial header's meaning, so trials are bracketed as the nghttp2 engine
brackets them: the client sends `begin` and `end` to the control port announced in the
listening line (agent.trial_control), and each `end` appends the trial's record to the trial
log, with the fields of the own server's records (agent/README.md): requests and the serve
window from the app's own `Activity`, CPU time over that window (getrusage: hypercorn runs in
this process), peak RSS (reset at `begin`), CPU % peak over 100 ms intervals. Frames and bytes
are hypercorn's own business: null.

Hypercorn announces MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_SIZE and takes frames up to its
inbound frame size; any other SETTINGS value asked for is refused (exit 2), never ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

from agent import probe
from agent.conditions import Host, TrialWatch
from agent.cpu_peak import CpuSampler
from agent.engines import DEFAULT_ENGINE
from agent.engines.hypercorn.spec import HYPERCORN_SETTINGS
from agent.errors import TrialControlError, UsageError
from agent.protocols import protocol_of_scheme, protocol_spec
from agent.server.ledger import TrialRecord
from agent.server.listener import listen
from agent.traffic import FrameCounts
from agent.trial_control import Begin, End, listen_control
from agent.trial_log import TrialLog
from agent.workloads.api.asgi import Activity, starlette_app
from agent.workloads.api.rest import Api
from agent.workloads.api.server import open_api
from agent.workloads.api.spec import API

log = logging.getLogger("h2iot.hypercorn")

ENGINE = "hypercorn"
SETTINGS: Mapping[str, str] = HYPERCORN_SETTINGS


@dataclass(frozen=True)
class HypercornServeOptions:
    root: Path | None
    params: Mapping[str, object]
    host: str
    port: int
    settings: Mapping[str, int]
    tls: tuple[Path, Path] | None  # (cert, key)
    trial_log: Path | None
    control_port: int = 0


def hypercorn_config(settings: Mapping[str, int], tls: tuple[Path, Path] | None) -> Config:
    """Hypercorn's Config for the SETTINGS asked for; UsageError naming one it cannot announce."""
    config = Config()
    for name, value in settings.items():
        attribute = SETTINGS.get(name)
        if attribute is None:
            raise UsageError(
                f"setting {name}: hypercorn has no option to announce it (engine hypercorn: "
                f"{', '.join(SETTINGS)}); use --engine {DEFAULT_ENGINE} for it"
            )
        setattr(config, attribute, value)
    config.accesslog = None  # a log line per request would be CPU the comparison pays for
    # Hypercorn ends a connection with GOAWAY after 1000 requests by default; a trial carries
    # users x loops x 7 on one connection, as the agent's own server does without a cap.
    config.keep_alive_max_requests = 2**62
    if tls is not None:
        config.certfile, config.keyfile = (str(path) for path in tls)
        tls_protocol = protocol_spec(protocol_of_scheme("https"))
        config.alpn_protocols = [tls_protocol.alpn or tls_protocol.name]
    return config


def announced(config: Config) -> dict[str, int]:
    return {name: int(getattr(config, attribute)) for name, attribute in SETTINGS.items()}


class HypercornTrials:
    """The trial brackets around hypercorn in this process; one trial at a time."""

    def __init__(self, activity: Activity, trial_log: TrialLog) -> None:
        self.activity = activity
        self.trial_log = trial_log
        self.cpu_peaks = CpuSampler()
        self.trial: tuple[str, bool] | None = None  # (trial_id, peak RSS mark reset)
        # The node's state over each trial (agent.conditions), as the own server's records have.
        self._node = Host()
        self._watch: TrialWatch | None = None

    async def begin(self, message: Begin) -> None:
        if self.trial is not None:
            raise TrialControlError(
                f"trial {self.trial[0]} is still open: the hypercorn engine's trials cannot "
                "overlap (its CPU time is counted per process)"
            )
        self.activity.reset()
        self.trial = (message.trial_id, probe.reset_peak_rss())
        self._watch = TrialWatch(self._node, instant_start=False)
        self.cpu_peaks.open(message.trial_id)

    async def end(self, message: End) -> None:
        if self.trial is None or self.trial[0] != message.trial_id:
            raise TrialControlError(f"trial {message.trial_id} is not open")
        trial_id, rss_reset = self.trial
        self.trial = None
        record = self.record(trial_id, message.ok, rss_reset)
        self.trial_log.append(record)

    def abandon(self, trial_id: str) -> None:
        if self.trial is not None and self.trial[0] == trial_id:
            log.warning("trial %s: its client hung up before `end`; no record", trial_id)
            self.cpu_peaks.close(trial_id)
            self.trial = self._watch = None

    def record(self, trial_id: str, client_ok: bool, rss_reset: bool) -> dict[str, object]:
        activity = self.activity
        cpu_peak_pct = self.cpu_peaks.close(trial_id)
        now = probe.sample()
        start, end = activity.first or now, activity.last or activity.first or now
        span = probe.ProbeSpan(start, end, probe.peak_rss_bytes(), rss_reset)
        nothing = FrameCounts({}, {}, 0)
        record = TrialRecord.over(
            span,
            trial_id=trial_id,
            workload=API.kind,
            ok=client_ok and activity.requests > 0 and activity.responses == activity.requests,
            requests=activity.requests,
            responses_completed=activity.responses,
            streams_reset=0,
            rss_peak_is_trial=rss_reset,
            sent=nothing,
            received=nothing,
            cpu_peak_pct=cpu_peak_pct,
        )
        # What hypercorn does not tell: null, not zero.
        unknown = dict.fromkeys(("streams_reset", "sent", "received"))
        watch, self._watch = self._watch, None
        conditions = None if watch is None else watch.end().to_dict()
        return {
            **record.to_dict(),
            **unknown,
            "conditions": conditions,
            "engine": ENGINE,
            "counts_from": "server",
        }


async def serve_hypercorn(options: HypercornServeOptions) -> int:
    """Serve until SIGTERM/SIGINT (exit 0)."""
    api = open_api(options.root, options.params)
    config = hypercorn_config(options.settings, options.tls)
    sockets = listen(options.host, options.port)
    port = sockets[0].getsockname()[1]
    # Hypercorn takes the sockets over by descriptor: this process bound them, so the port is
    # known (port 0 included) before hypercorn starts.
    config.bind = [f"fd://{sock.detach()}" for sock in sockets]
    trial_log = TrialLog(options.trial_log)
    activity = Activity()
    trials = HypercornTrials(activity, trial_log)
    try:
        return await _serve(
            options, config=config, api=api, activity=activity, trials=trials, port=port
        )
    finally:
        api.layer.close()
        trial_log.close()


async def _serve(
    options: HypercornServeOptions,
    *,
    config: Config,
    api: Api,
    activity: Activity,
    trials: HypercornTrials,
    port: int,
) -> int:
    control = await listen_control(trials, options.host, options.control_port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(
        json.dumps(
            {
                "event": "listening",
                "engine": ENGINE,
                "scheme": "http" if options.tls is None else "https",
                "address": f"{options.host}:{port}",
                "port": port,
                "control_port": control.sockets[0].getsockname()[1],
                "settings": announced(config),
                "data_layer": api.layer.kind,
            }
        ),
        file=sys.stderr,
        flush=True,
    )
    try:
        # Starlette and hypercorn spell the same ASGI callable with different type names.
        app: Any = starlette_app(api, activity)
        await serve(app, config, shutdown_trigger=stop.wait)
    finally:
        control.close()
    return 0
