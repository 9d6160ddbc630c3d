"""What `h2iot-agent serve|fetch --engine nghttp2` (and `--trial-control`) do with the parsed
command line; agent.cli stays the one place options are declared."""

from __future__ import annotations

import argparse
import asyncio
import sys

from agent.client.options import RunPlan
from agent.errors import UsageError
from agent.nghttp2.client import NghttpPlan, run_nghttp_fetches
from agent.nghttp2.options import NghttpdOptions, NghttpOptions
from agent.nghttp2.server import NghttpdServeOptions, serve_nghttpd
from agent.nghttp2.windows import WindowMapping, describe


def _warn_mapped(name: str, mapping: WindowMapping | None) -> None:
    if mapping is not None and not mapping.exact:
        print(f"h2iot-agent: warning: {describe(name, mapping)}", file=sys.stderr, flush=True)


def serve(args: argparse.Namespace, settings: dict[str, int]) -> int:
    options = NghttpdOptions.create(settings, args.unrepresentable_window)
    _warn_mapped("initial_window_size", options.stream_window)
    return asyncio.run(
        serve_nghttpd(
            NghttpdServeOptions(
                root=args.root,
                host=args.host,
                port=args.port,
                nghttpd=options,
                tls=(args.cert, args.key) if args.tls else None,
                trial_log=args.trial_log,
                control_port=args.control_port or 0,
            )
        )
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
    nghttp = NghttpOptions.create(
        options.settings, options.flow.connection_window, args.unrepresentable_window
    )
    _warn_mapped("initial_window_size", nghttp.stream_window)
    _warn_mapped("--connection-window", nghttp.connection_window)
    return run_nghttp_fetches(NghttpPlan(plan, nghttp))
