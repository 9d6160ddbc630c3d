"""`h2iot-agent trial URL --workload KIND` and `fetch URL` (the page workload's verb): a run of
client trials, one record line each."""

from __future__ import annotations

import argparse
import math
import os
import socket
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

from agent.commands import add_example
from agent.commands.common import (
    add_ack_options,
    add_engine_options,
    add_protocol_option,
    add_quic_options,
    add_workload_options,
    check_engine,
    check_udp_buffer,
    pin,
)
from agent.engines import DEFAULT_ENGINE, engine_spec
from agent.errors import SettingsError, UsageError
from agent.event_loop import DEFAULT_EVENT_LOOP, EVENT_LOOPS, check_event_loop
from agent.h2.flow import (
    DEFAULT_WINDOW_UPDATE_POLICY,
    MAX_WINDOW,
    WINDOW_UPDATE_POLICIES,
    FlowControlOptions,
)
from agent.h2.settings import check_value, parse_settings
from agent.protocols import PROTOCOLS, protocol_of_scheme, protocol_spec, protocols_where
from agent.qlog import DEFAULT_MAX_BYTES, MIN_MAX_BYTES
from agent.registry import load_dotted
from agent.trial_request import DEFAULT_TIMEOUT_S, TrialRequest
from agent.workloads import DEFAULT_KIND

DEFAULT_CONNECTION_WINDOW = 65535  # the protocol's own

if TYPE_CHECKING:
    from agent.client.options import PeerClock
    from agent.engines.spec import EngineSpec, TrialEntry
    from agent.h2.flow import WindowUpdatePolicyName
    from agent.h3.ack_policy import AckPolicy
    from agent.protocols import ProtocolSpec


def _add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a SETTINGS value this client announces (repeatable), the window among them",
    )
    parser.add_argument(
        "--connection-window",
        type=int,
        default=DEFAULT_CONNECTION_WINDOW,
        help="connection-level receive window in bytes (default 65535, the "
        "protocol's; smaller values are reached by withholding updates)",
    )
    parser.add_argument(
        "--window-update",
        choices=WINDOW_UPDATE_POLICIES,
        default=DEFAULT_WINDOW_UPDATE_POLICY,
        help="when to send WINDOW_UPDATE (default: half, as nghttp2)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="trials, one connection each")
    parser.add_argument(
        "--trial-id",
        help="tag for the server's per-trial accounting (with --repeat R: ID-1 .. ID-R)",
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        help="page: the site manifest.json to verify bodies (default: GET it from the server)",
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per trial"
    )
    parser.add_argument("--json", action="store_true", help="one JSON line per trial")
    parser.add_argument("--marker", default="none", help="none | gpio:CHIP:LINE | fifo:PATH")
    parser.add_argument("--cpu", type=int, help="pin the process to this core")
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=DEFAULT_EVENT_LOOP,
        help="the h2 engine's event loop (default %(default)s; uvloop: the `uvloop` extra, "
        "less client CPU per round trip); the record's event_loop says which ran",
    )
    add_protocol_option(
        parser,
        "the URL's scheme says which HTTP/2; a protocol over QUIC is "
        "reached at an https URL's UDP port",
    )
    add_quic_options(parser)
    add_ack_options(parser)
    parser.add_argument("--insecure", action="store_true", help="TLS: skip certificate checks")
    parser.add_argument("--ca-file", help="TLS: trust this CA bundle")
    add_engine_options(parser)
    parser.add_argument(
        "--trial-control",
        metavar="HOST:PORT",
        help="bracket each trial with trial-control messages to an nghttpd server's agent "
        "(its control_port), which counts trials by them",
    )
    parser.add_argument(
        "--start-at",
        type=float,
        metavar="EPOCH_S",
        help="begin the first trial at this instant of this node's wall clock (Unix seconds), "
        "once the workload is prepared; at once if it has passed. Several clients started "
        "together agree on it through their clock offsets",
    )
    parser.add_argument(
        "--events-dir",
        type=Path,
        metavar="DIR",
        help="write each trial's event trace (qlog, JSON-SEQ) to DIR/<trial-id>.client.sqlog: "
        "HTTP/2 frames or qh3's QUIC events (agent/README.md, Event traces)",
    )
    parser.add_argument(
        "--events-max-bytes",
        type=int,
        metavar="BYTES",
        help=f"cut a longer trace at an event, saying so (default {DEFAULT_MAX_BYTES})",
    )
    parser.add_argument(
        "--peer-clock-offset-ns",
        type=int,
        metavar="NS",
        help="the server's wall clock minus this node's (ns, as the controller measured it): "
        "workloads timing from the server's clock to ours (stream's latencies) correct by it",
    )
    parser.add_argument(
        "--peer-clock-uncertainty-ns",
        type=int,
        default=0,
        metavar="NS",
        help="the +/- bound of --peer-clock-offset-ns, recorded with it (default 0)",
    )


def configure_fetch(fetch: argparse.ArgumentParser) -> None:
    _add_client_options(fetch)
    fetch.add_argument(
        "--initial-window-size",
        type=int,
        help="SETTINGS_INITIAL_WINDOW_SIZE in bytes, exact (default 65535); the same as "
        "--setting initial_window_size=N",
    )
    add_example(
        fetch,
        "h2iot-agent fetch http://127.0.0.1:8443/ --initial-window-size 4096 --repeat 3 --json",
    )
    fetch.set_defaults(handler=run, workload=DEFAULT_KIND, param=[])


def configure_trial(trial: argparse.ArgumentParser) -> None:
    _add_client_options(trial)
    add_workload_options(trial, default=None)
    add_example(
        trial,
        "h2iot-agent trial http://127.0.0.1:8443/ --workload blob --param size_bytes=65536 --json",
    )
    trial.set_defaults(handler=run, initial_window_size=None)


def client_settings(args: argparse.Namespace) -> dict[str, int]:
    """`--setting`s, with `--initial-window-size` as one of them (an alias: both given must
    agree). Each value is range-checked here, once."""
    settings = parse_settings(args.setting)
    if args.initial_window_size is not None:
        window = check_value("initial_window_size", args.initial_window_size)
        given = settings.setdefault("initial_window_size", window)
        if given != window:
            raise UsageError(
                f"--initial-window-size {window} and --setting initial_window_size={given} "
                "disagree; give the window once"
            )
    return settings


def run(args: argparse.Namespace) -> int:
    request = TrialRequest.from_args(args, client_settings(args))
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat} must be at least 1")
    return run_request(
        request,
        repeat=args.repeat,
        json_lines=args.json,
        insecure=args.insecure,
        udp_buffer_bytes=args.udp_buffer,
    )


def run_request(
    request: TrialRequest,
    *,
    repeat: int = 1,
    json_lines: bool = True,
    insecure: bool = False,
    udp_buffer_bytes: int | None = None,
) -> int:
    """The request's trials (`repeat` of them, on a person's command line), each checked here
    once and run by its engine."""
    from agent.client.options import RunPlan, TrialOptions  # noqa: PLC0415
    from agent.workloads import spec_of  # noqa: PLC0415
    from agent.workloads.page.spec import PAGE  # noqa: PLC0415
    from agent.workloads.params import parse_params  # noqa: PLC0415

    spec = spec_of(request.workload)
    engine = engine_spec(request.engine or DEFAULT_ENGINE)
    protocol = _protocol(request, udp_buffer_bytes)
    check_engine(engine, protocol, spec, client=True)
    params = parse_params(spec, [f"{k}={v}" for k, v in request.params], "client")
    refused = spec.refusal(params, protocol.name) or engine.client_refusal(
        spec.kind, params, protocol.name
    )
    if refused is not None:
        raise UsageError(f"--param {refused.message(protocol.name)} (--protocol {protocol.name})")
    connection_window = request.connection_window
    if connection_window is None:
        connection_window = DEFAULT_CONNECTION_WINDOW
    if not 0 <= connection_window <= MAX_WINDOW:
        raise UsageError(f"--connection-window {connection_window} is outside 0..{MAX_WINDOW}")
    if request.manifest is not None and spec.kind != PAGE.kind:
        raise UsageError(f"--manifest is for the page workload, not {spec.kind}")
    start_at = request.start_at_s
    if start_at is not None and not (math.isfinite(start_at) and start_at >= 0):
        raise UsageError(f"--start-at {start_at}: expected Unix seconds, 0 or more")
    peer_clock = _peer_clock(request.peer_clock_offset_ns, request.peer_clock_uncertainty_ns or 0)
    if engine.event_loop:
        check_event_loop(request.event_loop or DEFAULT_EVENT_LOOP)
    events_max_bytes = request.events_max_bytes or DEFAULT_MAX_BYTES
    if events_max_bytes < MIN_MAX_BYTES:
        raise UsageError(f"--events-max-bytes {events_max_bytes}: expected {MIN_MAX_BYTES} or more")
    if request.events_dir is not None and protocol.name not in engine.client_traces:
        raise UsageError(
            f"--events-dir: the {engine.name} engine's client writes no event trace over "
            f"{protocol.name} yet"
        )
    plan = RunPlan(
        url=request.url,
        options=TrialOptions(
            settings=MappingProxyType(dict(request.settings)),
            # The parser's choices checked the policy (a warm agent's request is parsed too).
            flow=FlowControlOptions(
                connection_window,
                cast(
                    "WindowUpdatePolicyName",
                    request.window_update_policy or DEFAULT_WINDOW_UPDATE_POLICY,
                ),
            ),
            timeout_s=request.timeout_s,
            insecure=insecure,
            ca_file=request.ca_file,
            cpu_pin=request.cpu,
            protocol=protocol.name,
            datagram_bytes=request.datagram_bytes,
            udp_buffer_bytes=udp_buffer_bytes,
            events_dir=None if request.events_dir is None else Path(request.events_dir),
            events_max_bytes=events_max_bytes,
            ack_policy=_ack_policy(request, protocol, engine),
        ),
        trial_id=request.trial_id or f"{socket.gethostname()}-{os.getpid()}",
        engine=engine.name,
        workload=spec.kind,
        params=MappingProxyType(params),
        repeat=repeat,
        json_lines=json_lines,
        marker=request.marker or "none",
        manifest_path=None if request.manifest is None else Path(request.manifest),
        trial_control=request.trial_control,
        peer_clock=peer_clock,
    )
    assert engine.trial is not None, "a client engine names its trial entry"
    pin(request.cpu)
    trial: TrialEntry = load_dotted(engine.trial)
    return trial(request, plan, protocol)


def _protocol(request: TrialRequest, udp_buffer_bytes: int | None) -> ProtocolSpec:
    """The request's protocol, checked against its URL: the scheme names a TCP protocol by
    itself; one over QUIC is reached by an https URL's host and (UDP) port."""
    url = request.url
    scheme = url.split(":", 1)[0]
    if scheme not in {protocol_spec(name).scheme for name in PROTOCOLS}:
        raise UsageError(f"URL {url!r} must be http://HOST:PORT/PATH or https://...")
    by_scheme = protocol_of_scheme(scheme)
    protocol = protocol_spec(request.protocol or by_scheme)
    if not protocol.quic:
        if protocol.name != by_scheme:
            raise UsageError(f"--protocol {protocol.name} contradicts the URL's scheme {scheme}")
        if request.datagram_bytes is not None or udp_buffer_bytes is not None:
            over_quic = " or ".join(protocols_where(quic=True))
            raise UsageError(f"--datagram-size and --udp-buffer are for --protocol {over_quic}")
        return protocol
    if scheme != protocol.scheme:
        raise UsageError(
            f"--protocol {protocol.name} needs an {protocol.scheme} URL (QUIC is always "
            f"encrypted): {url}"
        )
    policy = request.window_update_policy or DEFAULT_WINDOW_UPDATE_POLICY
    if policy != DEFAULT_WINDOW_UPDATE_POLICY:
        raise UsageError(
            f"--window-update is HTTP/2's: over {protocol.name} the QUIC stack grants credit "
            "its own way"
        )
    check_udp_buffer(udp_buffer_bytes)
    return protocol


def _ack_policy(
    request: TrialRequest, protocol: ProtocolSpec, engine: EngineSpec
) -> AckPolicy | None:
    """The client's ACK policy, where the request sets one: over QUIC, on an engine whose
    client takes one (agent.h3.ack_policy)."""
    threshold, delay_ms = request.ack_eliciting_threshold, request.max_ack_delay_ms
    if threshold is None and delay_ms is None:
        return None
    option = "--ack-eliciting-threshold" if threshold is not None else "--max-ack-delay-ms"
    if not protocol.quic:
        over_quic = " or ".join(protocols_where(quic=True))
        raise UsageError(f"{option} is for --protocol {over_quic}")
    if not engine.quic_ack_policy:
        raise UsageError(f"{option}: the {engine.name} engine's client has no ACK policy")
    from agent.h3.ack_policy import (  # noqa: PLC0415
        DEFAULT_ACK_ELICITING_THRESHOLD,
        DEFAULT_MAX_ACK_DELAY_MS,
        AckPolicy,
    )

    try:
        return AckPolicy(
            DEFAULT_ACK_ELICITING_THRESHOLD if threshold is None else threshold,
            DEFAULT_MAX_ACK_DELAY_MS if delay_ms is None else delay_ms,
        )
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


def _peer_clock(offset_ns: int | None, uncertainty_ns: int) -> PeerClock | None:
    if uncertainty_ns < 0:
        raise UsageError(f"--peer-clock-uncertainty-ns {uncertainty_ns} must be 0 or more")
    if offset_ns is None:
        if uncertainty_ns:
            raise UsageError("--peer-clock-uncertainty-ns needs --peer-clock-offset-ns")
        return None
    from agent.client.options import PeerClock  # noqa: PLC0415

    return PeerClock(offset_ns, uncertainty_ns)
