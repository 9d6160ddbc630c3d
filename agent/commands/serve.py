"""`h2iot-agent serve`: the HTTP/2 server, with one workload's handlers mounted."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from agent.commands import add_example
from agent.commands.common import (
    add_engine_options,
    add_protocol_option,
    add_quic_options,
    add_workload_options,
    check_engine,
    check_udp_buffer,
    pin,
    workload_params,
)
from agent.engines import engine_spec
from agent.errors import UsageError
from agent.event_loop import DEFAULT_EVENT_LOOP, EVENT_LOOPS, check_event_loop
from agent.h2.settings import parse_settings
from agent.limits import (
    CONNECTION_BUDGET_SHARE,
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    MAX_CONNECTION_BUDGET_BYTES,
    RESERVED_DESCRIPTORS,
)
from agent.protocols import protocol_of_scheme, protocol_spec, protocols_where
from agent.qlog import DEFAULT_MAX_BYTES, MIN_MAX_BYTES
from agent.registry import load_dotted
from agent.workloads import DEFAULT_KIND

if TYPE_CHECKING:
    from agent.engines.spec import EngineSpec, ServeEntry
    from agent.protocols import ProtocolSpec


def configure(serve: argparse.ArgumentParser) -> None:
    add_workload_options(serve, default=DEFAULT_KIND)
    serve.add_argument(
        "--root",
        type=Path,
        help="page: the site's directory; api: the database file (`api-db`); required for both",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8443, help="0 picks a free port")
    serve.add_argument(
        "--tls",
        action="store_true",
        help="HTTP/2 over TLS with ALPN (the https URL's protocol; needs --cert, --key)",
    )
    add_protocol_option(serve, "the cleartext HTTP/2 of the study, or --tls's")
    add_quic_options(serve)
    serve.add_argument(
        "--quic-retry",
        action="store_true",
        help="h3: validate each client's address with a Retry before the handshake (one more "
        "round trip per connection; agent.h3.amplification)",
    )
    serve.add_argument(
        "--no-quic-count-padding",
        dest="quic_count_padding",
        action="store_false",
        help="h3: leave qh3's anti-amplification credit uncorrected (a client's datagram "
        "padding after its Initial is not counted; agent.h3.amplification)",
    )
    serve.add_argument(
        "--no-quic-capacity-as-blocked",
        dest="quic_capacity_as_blocked",
        action="store_false",
        help="h3: let qh3's 'packet builder capacity exhausted' end the connection, as qh3 "
        "does, instead of waiting for the client's next bytes",
    )
    serve.add_argument("--cert", type=Path)
    serve.add_argument("--key", type=Path)
    serve.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a SETTINGS value this server announces (repeatable)",
    )
    serve.add_argument(
        "--settings-file",
        type=Path,
        metavar="FILE",
        help="h2 engine over HTTP/2: on SIGHUP take the SETTINGS in FILE for new connections "
        '({"generation": N, "settings": ["NAME=VALUE", ...]}; a "settings" event on stderr '
        "says when they apply)",
    )
    serve.add_argument(
        "--trial-log",
        type=Path,
        help="append one JSON line per finished trial here (default: stdout)",
    )
    serve.add_argument(
        "--events-dir",
        type=Path,
        metavar="DIR",
        help="write each trial's event trace (qlog, JSON-SEQ: HTTP/2 frames, or QUIC events) to "
        "DIR/<trial-id>.server.sqlog before its record (agent/README.md, Event traces)",
    )
    serve.add_argument(
        "--events-max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        metavar="BYTES",
        help="cut a longer trace at an event, saying so (default %(default)s)",
    )
    serve.add_argument("--cpu", type=int, help="pin the process to this core")
    serve.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=DEFAULT_EVENT_LOOP,
        help="the builtin engine's event loop (default %(default)s; uvloop: the `uvloop` extra, "
        "less server CPU per page); the listening line says which runs",
    )
    serve.add_argument(
        "--handshake-timeout",
        type=float,
        metavar="S",
        help="a connection's preface and first SETTINGS (and its TLS handshake) must be in "
        "within S seconds, else GOAWAY SETTINGS_TIMEOUT; h3: its QUIC handshake, else it is "
        f"dropped (default {DEFAULT_HANDSHAKE_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        metavar="S",
        help="close a connection on which no request arrived and no response byte was sent "
        f"for S seconds (GOAWAY NO_ERROR; default {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--ticket-lifetime",
        type=float,
        metavar="S",
        help="h3: a session ticket (for resumption and 0-RTT) resumes one handshake within S "
        "seconds of its issue (default: a day); h2's tickets are Python ssl's (OpenSSL's "
        "lifetime, which it cannot change)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="connections held at once; over it the longest idle one is closed to make room "
        f"(default: the open-files limit less {RESERVED_DESCRIPTORS}, or fewer where "
        "--connection-memory holds fewer; h3: what it holds; agent/README.md)",
    )
    serve.add_argument(
        "--connection-memory",
        type=int,
        metavar="BYTES",
        help="the memory the server's connections may take together, from which the default "
        f"caps are derived (default: 1/{CONNECTION_BUDGET_SHARE} of the node's MemAvailable, "
        f"at most {MAX_CONNECTION_BUDGET_BYTES // 2**20} MiB)",
    )
    add_engine_options(serve)
    serve.add_argument(
        "--control-port",
        type=int,
        help="the port clients send trial-control messages to (agent.trial_control), announced "
        "in the listening line (0: a free one). The nghttp2 and hypercorn engines always "
        "listen (default: a free one); the builtin engine when given it, for clients that send "
        "no trial header (gtlsclient)",
    )
    add_example(
        serve, "h2iot-agent serve --root /tmp/site --port 8443 --setting max_concurrent_streams=8"
    )
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.workloads import spec_of  # noqa: PLC0415

    workload = spec_of(args.workload)
    protocol = serve_protocol(args)
    engine = engine_spec(args.engine)
    check_engine(engine, protocol, workload, client=False)
    if args.events_dir is not None and protocol.name not in engine.server_traces:
        raise UsageError(
            f"--events-dir: the {engine.name} engine's server writes no event trace over "
            f"{protocol.name} yet"
        )
    if args.events_max_bytes < MIN_MAX_BYTES:
        raise UsageError(
            f"--events-max-bytes {args.events_max_bytes}: expected {MIN_MAX_BYTES} or more"
        )
    params = workload_params(workload, args, "server")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a TCP port")
    settings = parse_settings(args.setting)
    if args.settings_file is not None and (protocol.quic or not engine.reloads_settings):
        raise UsageError(
            "--settings-file is for an engine that reloads SETTINGS (over a TCP protocol): "
            f"{engine.name} over {protocol.name} does not"
        )
    if not engine.connection_limits:
        for option, value in (
            ("--handshake-timeout", args.handshake_timeout),
            ("--idle-timeout", args.idle_timeout),
            ("--max-connections", args.max_connections),
            ("--connection-memory", args.connection_memory),
        ):
            if value is not None:
                raise UsageError(f"{option}: {engine.server_tool} keeps its own limits")
    if args.control_port is not None:
        if not engine.takes_trial_control:
            raise UsageError(
                f"--control-port is for an engine counting trials by control messages, not "
                f"{engine.name}"
            )
        if not 0 <= args.control_port <= 65535:
            raise UsageError(f"--control-port {args.control_port} is not a TCP port")
    if protocol.quic:
        check_udp_buffer(args.udp_buffer)
    _check_ticket_lifetime(args.ticket_lifetime, protocol, engine)
    if args.event_loop != DEFAULT_EVENT_LOOP and not engine.event_loop:
        raise UsageError(f"--event-loop: the {engine.name} engine's server has no Python loop")
    check_event_loop(args.event_loop)
    pin(args.cpu)
    serve: ServeEntry = load_dotted(engine.serve)
    return serve(args, protocol, workload, params, settings)


def serve_protocol(args: argparse.Namespace) -> ProtocolSpec:
    """--protocol, with --tls as the https URL's; --cert and --key where TLS needs them."""
    if args.tls and (args.cert is None or args.key is None):
        raise UsageError("--tls needs --cert and --key")
    tls_protocol = protocol_of_scheme("https")
    protocol = protocol_spec(args.protocol or protocol_of_scheme("https" if args.tls else "http"))
    if args.tls and protocol.name != tls_protocol:
        raise UsageError(
            f"--tls is --protocol {tls_protocol}; it contradicts --protocol {protocol.name}"
        )
    if protocol.tls and (args.cert is None or args.key is None):
        raise UsageError(f"--protocol {protocol.name} needs --cert and --key")
    if not protocol.quic and (
        args.quic_retry or not args.quic_count_padding or not args.quic_capacity_as_blocked
    ):
        over_quic = " or ".join(protocols_where(quic=True))
        raise UsageError(f"the --quic-* and --no-quic-* options are for --protocol {over_quic}")
    return protocol


def _check_ticket_lifetime(
    lifetime_s: float | None, protocol: ProtocolSpec, engine: EngineSpec
) -> None:
    """--ticket-lifetime, when given: more than 0 s, for an HTTP/3 server of the agent's own
    (the session tickets agent.h3.tickets keeps)."""
    if lifetime_s is not None and not (
        protocol.quic and engine.connection_limits and lifetime_s > 0
    ):
        raise UsageError(
            f"--ticket-lifetime {lifetime_s:g}: an HTTP/3 server's of the agent's own engine, "
            "more than 0 s"
        )
