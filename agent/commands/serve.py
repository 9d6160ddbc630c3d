"""`h2iot-agent serve`: the HTTP/2 server, with one workload's handlers mounted."""

from __future__ import annotations

import argparse
from pathlib import Path
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
from agent.errors import UsageError
from agent.h2.settings import parse_settings
from agent.limits import (
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    RESERVED_DESCRIPTORS,
    ConnectionLimits,
    default_max_connections,
)
from agent.workloads import DEFAULT_KIND
from agent.workloads.spec import ParamValue

if TYPE_CHECKING:
    from agent.h3.settings import QuicWindows


def configure(serve: argparse.ArgumentParser) -> None:
    add_workload_options(serve, default=DEFAULT_KIND)
    serve.add_argument(
        "--root",
        type=Path,
        help="page: the site's directory; api: the database file (`api-db`); required for both",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8443, help="0 picks a free port")
    serve.add_argument("--tls", action="store_true", help="TLS with ALPN h2 (needs --cert, --key)")
    serve.add_argument(
        "--protocol",
        choices=("h2c", "h2", "h3"),
        help="h2c (cleartext, the default), h2 (TLS, the same as --tls) or h3 (HTTP/3 over "
        "QUIC on the UDP --port: the `h3` extra; needs --cert, --key)",
    )
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
    serve.add_argument("--cpu", type=int, help="pin the process to this core")
    serve.add_argument(
        "--handshake-timeout",
        type=float,
        metavar="S",
        help="a connection's preface and first SETTINGS (and its TLS handshake) must be in "
        f"within S seconds, else GOAWAY SETTINGS_TIMEOUT (default {DEFAULT_HANDSHAKE_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        metavar="S",
        help="close a connection on which no request arrived and no response byte was sent "
        f"for S seconds (GOAWAY NO_ERROR; default {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="connections held at once; over it the longest idle one is closed to make room "
        f"(default: the open-files limit less {RESERVED_DESCRIPTORS})",
    )
    add_engine_options(serve)
    serve.add_argument(
        "--control-port",
        type=int,
        help="nghttp2 engine: the port clients send trial-control messages to (default: a free "
        "one, announced in the listening line)",
    )
    add_example(
        serve, "h2iot-agent serve --root /tmp/site --port 8443 --setting max_concurrent_streams=8"
    )
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.workloads import spec_of  # noqa: PLC0415

    spec = spec_of(args.workload)
    params = workload_params(spec, args, "server")
    if args.tls and (args.cert is None or args.key is None):
        raise UsageError("--tls needs --cert and --key")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a TCP port")
    settings = parse_settings(args.setting)
    protocol = serve_protocol(args)
    if args.settings_file is not None and (protocol == "h3" or args.engine != "h2"):
        raise UsageError("--settings-file is for --engine h2 over HTTP/2 (--protocol h2c or h2)")
    pin(args.cpu)
    if protocol == "h3" and args.engine != "nghttp2":
        return _serve_h3(args, params, settings)
    if args.engine == "nghttp2":
        from agent.nghttp2 import cli_support  # noqa: PLC0415

        for option, value in (
            ("--handshake-timeout", args.handshake_timeout),
            ("--idle-timeout", args.idle_timeout),
            ("--max-connections", args.max_connections),
        ):
            if value is not None:
                raise UsageError(f"{option} is for --engine h2 (nghttpd keeps its own limits)")

        if args.root is None:
            raise UsageError("--root DIR (the site) is required for the page workload")
        if args.control_port is not None and not 0 <= args.control_port <= 65535:
            raise UsageError(f"--control-port {args.control_port} is not a TCP port")
        return cli_support.serve(args, settings, http3=protocol == "h3")
    if args.engine == "hypercorn":
        return _serve_hypercorn(args, params, settings)
    if args.control_port is not None:
        raise UsageError("--control-port is for --engine nghttp2 or hypercorn")
    limits = connection_limits(args)
    from agent.server.app import ServerOptions, serve  # noqa: PLC0415
    from agent.workloads.load import server_mount  # noqa: PLC0415

    handler = server_mount(spec.kind)(args.root, params)
    options = ServerOptions(
        host=args.host,
        port=args.port,
        settings=settings,
        tls_cert=args.cert if args.tls else None,
        tls_key=args.key if args.tls else None,
        trial_log=args.trial_log,
        workload=spec.kind,
        limits=limits,
        settings_file=args.settings_file,
    )
    import asyncio  # noqa: PLC0415

    return asyncio.run(serve(options, handler))


def _serve_hypercorn(
    args: argparse.Namespace, params: dict[str, ParamValue], settings: dict[str, int]
) -> int:
    for option, value in (
        ("--handshake-timeout", args.handshake_timeout),
        ("--idle-timeout", args.idle_timeout),
        ("--max-connections", args.max_connections),
    ):
        if value is not None:
            raise UsageError(f"{option} is for --engine h2 (hypercorn keeps its own limits)")
    if args.control_port is not None and not 0 <= args.control_port <= 65535:
        raise UsageError(f"--control-port {args.control_port} is not a TCP port")
    import asyncio  # noqa: PLC0415

    from agent.workloads.api.hypercorn_engine import (  # noqa: PLC0415
        HypercornServeOptions,
        serve_hypercorn,
    )

    options = HypercornServeOptions(
        root=args.root,
        params=params,
        host=args.host,
        port=args.port,
        settings=settings,
        tls=(args.cert, args.key) if args.tls else None,
        trial_log=args.trial_log,
        control_port=args.control_port or 0,
    )
    return asyncio.run(serve_hypercorn(options))


def serve_protocol(args: argparse.Namespace) -> str:
    """--protocol, with --tls as h2; --cert and --key where TLS needs them."""
    protocol: str = args.protocol or ("h2" if args.tls else "h2c")
    if args.tls and protocol != "h2":
        raise UsageError(f"--tls is --protocol h2; it contradicts --protocol {protocol}")
    if protocol != "h2c" and (args.cert is None or args.key is None):
        raise UsageError(f"--protocol {protocol} needs --cert and --key")
    args.tls = protocol == "h2"
    if protocol != "h3" and (
        args.quic_retry or not args.quic_count_padding or not args.quic_capacity_as_blocked
    ):
        raise UsageError("the --quic-* and --no-quic-* options are for --protocol h3")
    return protocol


def _serve_h3(
    args: argparse.Namespace, params: dict[str, ParamValue], settings: dict[str, int]
) -> int:
    if args.engine != "h2":
        raise UsageError(f"--protocol h3 runs on --engine h2 or nghttp2, not {args.engine}")
    if args.control_port is not None or args.handshake_timeout is not None:
        raise UsageError("--control-port and --handshake-timeout are not for --protocol h3")
    import asyncio  # noqa: PLC0415

    from agent.workloads import spec_of  # noqa: PLC0415
    from agent.workloads.load import server_mount  # noqa: PLC0415

    if "h3" not in spec_of(args.workload).protocols:
        raise UsageError(f"the {args.workload} workload does not run over HTTP/3 (--protocol h3)")
    require_h3()
    from agent.h3.amplification import AmplificationFixes  # noqa: PLC0415
    from agent.server.h3 import H3ServeOptions, serve_h3  # noqa: PLC0415

    limits = connection_limits(args)
    windows = _server_windows(args, settings)
    handler = server_mount(spec_of(args.workload).kind)(args.root, params)
    options = H3ServeOptions(
        windows=windows,
        cert=args.cert,
        key=args.key,
        host=args.host,
        port=args.port,
        trial_log=args.trial_log,
        workload=args.workload,
        fixes=AmplificationFixes(
            count_padding=args.quic_count_padding,
            capacity_as_blocked=args.quic_capacity_as_blocked,
            retry=args.quic_retry,
        ),
        idle_timeout_s=limits.idle_timeout_s,
        max_connections=limits.max_connections,
        buffer_bytes=args.udp_buffer,
    )
    return asyncio.run(serve_h3(options, handler))


def _server_windows(args: argparse.Namespace, settings: dict[str, int]) -> QuicWindows:
    """The HTTP/2-named `settings` as an HTTP/3 server's (a setting without a counterpart
    refused, naming it), with --datagram-size. A server receives only requests: its connection
    window is its stream window, as an HTTP/2 server's is 65535."""
    from agent.h2.settings import DEFAULT_INITIAL_WINDOW_SIZE  # noqa: PLC0415
    from agent.h3.settings import QuicWindows  # noqa: PLC0415

    check_udp_buffer(args)
    return QuicWindows.from_settings(
        settings,
        default_stream_window_bytes=DEFAULT_INITIAL_WINDOW_SIZE,
        connection_window_bytes=settings.get("initial_window_size", DEFAULT_INITIAL_WINDOW_SIZE),
        datagram_bytes=args.datagram_size,
    )


def connection_limits(args: argparse.Namespace) -> ConnectionLimits:
    """The h2 engine's connection limits from the command line, each checked here, once."""
    handshake_timeout_s = _seconds("--handshake-timeout", args.handshake_timeout)
    idle_timeout_s = _seconds("--idle-timeout", args.idle_timeout)
    if args.max_connections is not None and args.max_connections < 1:
        raise UsageError(f"--max-connections {args.max_connections} must be at least 1")
    return ConnectionLimits(
        handshake_timeout_s=handshake_timeout_s or DEFAULT_HANDSHAKE_TIMEOUT_S,
        idle_timeout_s=idle_timeout_s or DEFAULT_IDLE_TIMEOUT_S,
        max_connections=args.max_connections or default_max_connections(),
    )


def _seconds(option: str, value: float | None) -> float | None:
    if value is not None and not 0 < value < float("inf"):
        raise UsageError(f"{option} {value:g} must be a positive number of seconds")
    return value
