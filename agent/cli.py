"""The `h2iot-agent` command: `site build`, `serve`, `fetch`.

Exit status: 0 success, 1 a failed fetch or an outside failure, 2 a usage error (bad option,
setting, file); every error is one line on stderr naming what is at fault.

Each command imports what it needs when it runs: the controller checks a node with
`--version` first, which then stays near a bare interpreter's memory (about 9 MiB, against 12
with asyncio), so a small device's memory limit is spent on the measured fetch, not on start-up.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType

from agent import __version__
from agent.errors import AgentError, UsageError
from agent.flow import (
    DEFAULT_WINDOW_UPDATE_POLICY,
    MAX_WINDOW,
    WINDOW_UPDATE_POLICIES,
    FlowControlOptions,
)
from agent.settings import check_value, parse_settings

ENGINES = ("h2", "nghttp2")
UNREPRESENTABLE_WINDOW = ("map", "reject")


def _add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="h2",
        help="HTTP/2 implementation: this agent's own (h2) or the study's nghttp2 tools "
        "(nghttp / nghttpd); default h2",
    )
    parser.add_argument(
        "--unrepresentable-window",
        choices=UNREPRESENTABLE_WINDOW,
        default="map",
        help="nghttp2 engine: a window that is not 2^N - 1 bytes is mapped to the nearest "
        "2^N - 1 (recorded, with a warning) or rejected (exit 2); default map",
    )


class _Parser(argparse.ArgumentParser):
    """argparse that exits with status 2 and one line, like the rest of the agent's errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="h2iot-agent", description="h2iot node agent (HTTP/2 over h2)")
    parser.add_argument("--version", action="version", version=f"h2iot-agent {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    site = commands.add_parser("site", help="the test page")
    site_commands = site.add_subparsers(dest="site_command", metavar="ACTION", required=True)
    build = site_commands.add_parser("build", help="write the deterministic test page")
    build.add_argument("directory", type=Path)
    build.add_argument("--seed", type=int, default=0)
    build.add_argument(
        "--total-bytes",
        type=int,
        default=None,
        help="approximate size of the page with all its files (default 7 MB)",
    )
    build.set_defaults(handler=_site_build)

    serve = commands.add_parser("serve", help="serve a directory over HTTP/2")
    serve.add_argument("--root", type=Path, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8443, help="0 picks a free port")
    serve.add_argument("--tls", action="store_true", help="TLS with ALPN h2 (needs --cert, --key)")
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
        "--trial-log",
        type=Path,
        help="append one JSON line per finished trial here (default: stdout)",
    )
    serve.add_argument("--cpu", type=int, help="pin the process to this core")
    _add_engine_options(serve)
    serve.add_argument(
        "--control-port",
        type=int,
        help="nghttp2 engine: the port clients send trial-control messages to (default: a free "
        "one, announced in the listening line)",
    )
    serve.set_defaults(handler=_serve)

    fetch = commands.add_parser("fetch", help="fetch a page and its subresources over HTTP/2")
    fetch.add_argument("url")
    fetch.add_argument(
        "--initial-window-size",
        type=int,
        help="SETTINGS_INITIAL_WINDOW_SIZE in bytes, exact (default 65535); the same as "
        "--setting initial_window_size=N",
    )
    fetch.add_argument(
        "--connection-window",
        type=int,
        default=65535,
        help="connection-level receive window in bytes (default 65535, the "
        "protocol's; smaller values are reached by withholding updates)",
    )
    fetch.add_argument(
        "--window-update",
        choices=WINDOW_UPDATE_POLICIES,
        default=DEFAULT_WINDOW_UPDATE_POLICY,
        help="when to send WINDOW_UPDATE (default: half, as nghttp2)",
    )
    fetch.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a SETTINGS value this client announces (repeatable), the window among them",
    )
    fetch.add_argument("--repeat", type=int, default=1, help="page fetches, one connection each")
    fetch.add_argument(
        "--trial-id",
        help="tag for the server's per-trial accounting (with --repeat R: ID-1 .. ID-R)",
    )
    fetch.add_argument(
        "--manifest",
        type=Path,
        help="site manifest.json to verify bodies (default: GET it from the server)",
    )
    fetch.add_argument("--timeout", type=float, default=120.0, help="seconds per page fetch")
    fetch.add_argument("--json", action="store_true", help="one JSON line per page fetch")
    fetch.add_argument("--marker", default="none", help="none | gpio:CHIP:LINE | fifo:PATH")
    fetch.add_argument("--cpu", type=int, help="pin the process to this core")
    fetch.add_argument("--insecure", action="store_true", help="TLS: skip certificate checks")
    fetch.add_argument("--ca-file", help="TLS: trust this CA bundle")
    _add_engine_options(fetch)
    fetch.add_argument(
        "--trial-control",
        metavar="HOST:PORT",
        help="bracket each fetch with trial-control messages to an nghttpd server's agent "
        "(its control_port), which counts trials by them",
    )
    fetch.set_defaults(handler=_fetch)
    return parser


def _site_build(args: argparse.Namespace) -> int:
    from agent.site import DEFAULT_TOTAL_BYTES, build_site  # noqa: PLC0415

    total = DEFAULT_TOTAL_BYTES if args.total_bytes is None else args.total_bytes
    manifest = build_site(args.directory, seed=args.seed, total_bytes=total)
    print(f"wrote {len(manifest.files)} files, {manifest.total_bytes} bytes, to {args.directory}")
    return 0


def _pin(cpu: int | None) -> None:
    if cpu is None:
        return
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError) as exc:
        raise UsageError(f"--cpu {cpu}: cannot pin to that core ({exc})") from None


def _serve(args: argparse.Namespace) -> int:
    from agent.server.app import ServerOptions, serve  # noqa: PLC0415
    from agent.server.content import FileHandler  # noqa: PLC0415

    if args.tls and (args.cert is None or args.key is None):
        raise UsageError("--tls needs --cert and --key")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a TCP port")
    _pin(args.cpu)
    if args.engine == "nghttp2":
        from agent.nghttp2 import cli_support  # noqa: PLC0415

        if args.control_port is not None and not 0 <= args.control_port <= 65535:
            raise UsageError(f"--control-port {args.control_port} is not a TCP port")
        return cli_support.serve(args, parse_settings(args.setting))
    if args.control_port is not None:
        raise UsageError("--control-port is for --engine nghttp2")
    handler = FileHandler(args.root)
    options = ServerOptions(
        host=args.host,
        port=args.port,
        settings=parse_settings(args.setting),
        tls_cert=args.cert if args.tls else None,
        tls_key=args.key if args.tls else None,
        trial_log=args.trial_log,
    )
    import asyncio  # noqa: PLC0415

    return asyncio.run(serve(options, handler))


def _client_settings(args: argparse.Namespace) -> dict[str, int]:
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


def _fetch(args: argparse.Namespace) -> int:
    from agent.client.options import RunPlan, TrialOptions  # noqa: PLC0415
    from agent.client.run import run_fetches  # noqa: PLC0415

    settings = _client_settings(args)
    if not 0 <= args.connection_window <= MAX_WINDOW:
        raise UsageError(f"--connection-window {args.connection_window} is outside 0..{MAX_WINDOW}")
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat} must be at least 1")
    _pin(args.cpu)
    plan = RunPlan(
        url=args.url,
        options=TrialOptions(
            settings=MappingProxyType(settings),
            flow=FlowControlOptions(args.connection_window, args.window_update),
            timeout_s=args.timeout,
            insecure=args.insecure,
            ca_file=args.ca_file,
            cpu_pin=args.cpu,
        ),
        trial_id=args.trial_id or f"{socket.gethostname()}-{os.getpid()}",
        repeat=args.repeat,
        json_lines=args.json,
        marker=args.marker,
        manifest_path=args.manifest,
        trial_control=args.trial_control,
    )
    if args.engine == "nghttp2" or args.trial_control:
        from agent.nghttp2 import cli_support  # noqa: PLC0415

        if args.engine == "nghttp2":
            return cli_support.fetch(args, plan)
        return cli_support.fetch_bracketed(plan)
    import asyncio  # noqa: PLC0415

    return asyncio.run(run_fetches(plan))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.INFO,
            format="h2iot-agent %(name)s: %(message)s",
        )
        status: int = args.handler(args)
    except AgentError as exc:
        print(f"h2iot-agent: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
