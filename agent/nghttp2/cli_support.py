"""What `h2iot-agent serve|fetch --engine nghttp2` (and `--trial-control`) do with the parsed
command line; agent.cli stays the one place options are declared."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from agent.client.options import RunPlan
from agent.errors import UsageError
from agent.nghttp2.client import NghttpPlan, run_nghttp_fetches
from agent.nghttp2.options import NghttpdOptions, NghttpOptions
from agent.nghttp2.server import NghttpdServeOptions, ServedProgram, serve_nghttpd
from agent.nghttp2.windows import WindowMapping, describe


def _warn_mapped(name: str, mapping: WindowMapping | None) -> None:
    if mapping is not None and not mapping.exact:
        print(f"h2iot-agent: warning: {describe(name, mapping)}", file=sys.stderr, flush=True)


def serve(args: argparse.Namespace, settings: dict[str, int], http3: bool = False) -> int:
    """nghttpd, or over HTTP/3 (`http3`) gtlsserver, with the agent's trial accounting."""
    tls = (args.cert, args.key) if args.tls or http3 else None
    if http3:
        program = _gtlsserver(args, settings, tls)
    else:
        options = NghttpdOptions.create(settings, args.unrepresentable_window)
        _warn_mapped("initial_window_size", options.stream_window)
        program = ServedProgram.nghttpd(options, args.root, args.host, args.port, tls)
    return asyncio.run(
        serve_nghttpd(
            NghttpdServeOptions(
                root=args.root,
                host=args.host,
                port=args.port,
                program=program,
                tls=tls,
                trial_log=args.trial_log,
                control_port=args.control_port or 0,
            )
        )
    )


def _gtlsserver(
    args: argparse.Namespace, settings: dict[str, int], tls: tuple[Path, Path] | None
) -> ServedProgram:
    from agent.nghttp2.gtls import GtlsOptions  # noqa: PLC0415

    assert tls is not None
    files = (str(tls[0]), str(tls[1]))
    gtls = GtlsOptions.create(settings, None, args.datagram_size)
    return ServedProgram(
        "gtlsserver",
        lambda path: gtls.server_argv(path, str(args.root), args.host, args.port, files),
        gtls.announced(),
        "h3",
    )


def fetch(args: argparse.Namespace, plan: RunPlan) -> int:
    options = plan.options
    if options.flow.window_update_policy != "half":
        raise UsageError(
            f"--window-update {options.flow.window_update_policy}: nghttp2 updates windows once "
            "half is consumed (half); other policies need --engine h2"
        )
    if options.ca_file is not None:
        raise UsageError("--ca-file: nghttp does not verify certificates; use --engine h2")
    if options.http3:
        from agent.nghttp2.gtls import GtlsOptions  # noqa: PLC0415
        from agent.nghttp2.gtls_client import run_gtls_fetches  # noqa: PLC0415

        gtls = GtlsOptions.create(
            dict(options.settings), options.flow.connection_window, options.datagram_bytes
        )
        return run_gtls_fetches(plan, gtls)
    nghttp = NghttpOptions.create(
        options.settings, options.flow.connection_window, args.unrepresentable_window
    )
    _warn_mapped("initial_window_size", nghttp.stream_window)
    _warn_mapped("--connection-window", nghttp.connection_window)
    return run_nghttp_fetches(NghttpPlan(plan, nghttp))
