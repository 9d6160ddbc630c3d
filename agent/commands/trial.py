"""`h2iot-agent trial URL --workload KIND` and `fetch URL` (the page workload's verb): a run of
client trials, one record line each."""

from __future__ import annotations

import argparse
import math
import os
import socket
import time
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from agent.commands import add_example
from agent.commands.common import (
    add_engine_options,
    add_quic_options,
    add_workload_options,
    check_udp_buffer,
    pin,
    require_h3,
    workload_params,
)
from agent.engines import ENGINE_SPECS, SERVER_ONLY_ENGINES
from agent.errors import UsageError
from agent.event_loop import DEFAULT_EVENT_LOOP, EVENT_LOOPS, check_event_loop, run_on
from agent.h2.flow import (
    DEFAULT_WINDOW_UPDATE_POLICY,
    MAX_WINDOW,
    WINDOW_UPDATE_POLICIES,
    FlowControlOptions,
)
from agent.h2.settings import check_value, parse_settings
from agent.workloads import DEFAULT_KIND

if TYPE_CHECKING:
    from agent.client.connect import Target
    from agent.client.options import PeerClock, RunPlan
    from agent.client.run import Prepare, Prepared


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
        default=65535,
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
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per trial")
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
    parser.add_argument(
        "--protocol",
        choices=("h2c", "h2", "h3"),
        help="h2c or h2 (HTTP/2; the URL's scheme says which, the default) or h3 (HTTP/3 over "
        "QUIC to the URL's UDP port; an https URL; the `h3` extra)",
    )
    add_quic_options(parser)
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
    from agent.client.options import RunPlan, TrialOptions  # noqa: PLC0415
    from agent.workloads import spec_of  # noqa: PLC0415
    from agent.workloads.page.spec import PAGE  # noqa: PLC0415

    spec = spec_of(args.workload)
    if args.engine in SERVER_ONLY_ENGINES:
        raise UsageError(f"--engine {args.engine} only serves; a client runs h2 or nghttp2")
    params = workload_params(spec, args, "client")
    settings = client_settings(args)
    if not 0 <= args.connection_window <= MAX_WINDOW:
        raise UsageError(f"--connection-window {args.connection_window} is outside 0..{MAX_WINDOW}")
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat} must be at least 1")
    if args.manifest is not None and spec.kind != PAGE.kind:
        raise UsageError(f"--manifest is for the page workload, not {spec.kind}")
    if args.start_at is not None and not (math.isfinite(args.start_at) and args.start_at >= 0):
        raise UsageError(f"--start-at {args.start_at}: expected Unix seconds, 0 or more")
    peer_clock = _peer_clock(args.peer_clock_offset_ns, args.peer_clock_uncertainty_ns)
    if args.engine == "h2":
        check_event_loop(args.event_loop)
    http3 = _http3(args)
    if http3 and "h3" not in spec.protocols:
        raise UsageError(f"the {spec.kind} workload does not run over HTTP/3 (--protocol h3)")
    own_h3 = http3 and args.engine == "h2"  # qh3; the nghttp2 engine's HTTP/3 is ngtcp2's
    if own_h3:
        require_h3()
        # qh3 and the agent's HTTP/3 loaded and initialised now, not in the first trial's
        # measured window.
        from agent.client.h3 import warm_up  # noqa: PLC0415

        warm_up()
    pin(args.cpu)
    plan = RunPlan(
        url=args.url,
        options=TrialOptions(
            settings=MappingProxyType(settings),
            flow=FlowControlOptions(args.connection_window, args.window_update),
            timeout_s=args.timeout,
            insecure=args.insecure,
            ca_file=args.ca_file,
            cpu_pin=args.cpu,
            http3=http3,
            datagram_bytes=args.datagram_size,
            udp_buffer_bytes=args.udp_buffer,
        ),
        trial_id=args.trial_id or f"{socket.gethostname()}-{os.getpid()}",
        workload=spec.kind,
        params=MappingProxyType(params),
        repeat=args.repeat,
        json_lines=args.json,
        marker=args.marker,
        manifest_path=args.manifest,
        trial_control=args.trial_control,
        peer_clock=peer_clock,
    )
    if own_h3:
        plan.options.quic_windows()  # a setting without a counterpart fails here, before any trial
    if args.engine == "nghttp2":
        from agent.nghttp2 import cli_support  # noqa: PLC0415

        wait_until(args.start_at)
        return cli_support.fetch(args, plan)
    from agent.client.run import TrialBracket, run_trials  # noqa: PLC0415
    from agent.workloads.load import client_prepare  # noqa: PLC0415

    bracket: TrialBracket | None = None
    if plan.trial_control is not None:
        from agent.trial_control import TrialControl  # noqa: PLC0415

        bracket = TrialControl(plan.trial_control)
    prepare: Prepare = client_prepare(spec.kind)
    if args.start_at is not None:
        prepare = _then_wait(prepare, args.start_at)
    return run_on(args.event_loop, lambda: run_trials(plan, prepare, bracket))


def _http3(args: argparse.Namespace) -> bool:
    """Whether the trials run over HTTP/3, --protocol checked against the URL and engine."""
    scheme = args.url.split(":", 1)[0]
    if args.protocol is None or args.protocol == {"http": "h2c", "https": "h2"}.get(scheme):
        if args.datagram_size is not None or args.udp_buffer is not None:
            raise UsageError("--datagram-size and --udp-buffer are for --protocol h3")
        return False
    if args.protocol != "h3":
        raise UsageError(f"--protocol {args.protocol} contradicts the URL's scheme {scheme}")
    if scheme != "https":
        raise UsageError(f"--protocol h3 needs an https URL (QUIC is always encrypted): {args.url}")
    if "h3" not in ENGINE_SPECS[args.engine].protocols:
        runs = " or ".join(e for e, spec in ENGINE_SPECS.items() if "h3" in spec.protocols)
        raise UsageError(f"--protocol h3 runs on --engine {runs}, not {args.engine}")
    if args.window_update != DEFAULT_WINDOW_UPDATE_POLICY:
        raise UsageError(
            "--window-update is HTTP/2's: over HTTP/3 the QUIC stack grants credit its own way"
        )
    check_udp_buffer(args)
    return True


def _peer_clock(offset_ns: int | None, uncertainty_ns: int) -> PeerClock | None:
    if uncertainty_ns < 0:
        raise UsageError(f"--peer-clock-uncertainty-ns {uncertainty_ns} must be 0 or more")
    if offset_ns is None:
        if uncertainty_ns:
            raise UsageError("--peer-clock-uncertainty-ns needs --peer-clock-offset-ns")
        return None
    from agent.client.options import PeerClock  # noqa: PLC0415

    return PeerClock(offset_ns, uncertainty_ns)


def wait_until(start_at: float | None) -> None:
    """Sleep until this node's wall clock reads `start_at` (no busy wait: a spinning client
    would be measured); return at once when it has passed or is None."""
    if start_at is None:
        return
    while (left := start_at - time.time()) > 0:
        time.sleep(left)


def _then_wait(prepare: Prepare, start_at: float) -> Prepare:
    """`prepare` (the workload's set-up, untimed, e.g. hashing a blob), then the wait: so the
    first trial, not the set-up, begins at the agreed instant."""

    async def prepared_then_waited(plan: RunPlan, target: Target) -> Prepared:
        prepared = await prepare(plan, target)
        wait_until(start_at)
        return prepared

    return prepared_then_waited
