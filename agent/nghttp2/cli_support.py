"""What `h2iot-agent serve|fetch --engine nghttp2` (and `--trial-control`) do with the parsed
command line; agent.cli stays the one place options are declared."""

from __future__ import annotations

import argparse
import asyncio
import sys

from agent.client.run import FetchPlan
from agent.errors import UsageError
from agent.nghttp2.client import NghttpPlan, run_nghttp_fetches
from agent.nghttp2.h2_bracketed import run_bracketed_fetches
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


def fetch(args: argparse.Namespace, plan: FetchPlan) -> int:
    if plan.flow.window_update_policy != "half":
        raise UsageError(
            f"--window-update {plan.flow.window_update_policy}: nghttp2 updates windows once "
            "half is consumed (half); other policies need --engine h2"
        )
    if plan.ca_file is not None:
        raise UsageError("--ca-file: nghttp does not verify certificates; use --engine h2")
    options = NghttpOptions.create(
        plan.flow.initial_window_size,
        plan.flow.connection_window,
        plan.settings,
        args.unrepresentable_window,
    )
    _warn_mapped("--initial-window-size", options.stream_window)
    _warn_mapped("--connection-window", options.connection_window)
    return run_nghttp_fetches(
        NghttpPlan(
            url=plan.url,
            options=options,
            repeat=plan.repeat,
            trial_id=plan.trial_id,
            manifest_path=plan.manifest_path,
            timeout_s=plan.timeout_s,
            json_lines=plan.json_lines,
            marker=plan.marker,
            cpu_pin=plan.cpu_pin,
            trial_control=args.trial_control,
        )
    )


def fetch_bracketed(plan: FetchPlan, control: str) -> int:
    return asyncio.run(run_bracketed_fetches(plan, control))
