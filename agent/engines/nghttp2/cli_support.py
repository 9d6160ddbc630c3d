"""What `h2iot-agent serve|fetch --engine nghttp2` (and `--trial-control`) do with the parsed
command line; agent.cli stays the one place options are declared."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agent.client.options import RunPlan
from agent.client.start_at import wait_until
from agent.engines import DEFAULT_ENGINE
from agent.engines.nghttp2.client import NghttpPlan, run_nghttp_fetches
from agent.engines.nghttp2.options import NghttpdOptions, NghttpOptions
from agent.engines.nghttp2.periodic_client import run_gtls_periodic, run_nghttp_periodic
from agent.engines.nghttp2.server import NghttpdServeOptions, ServedProgram, serve_nghttpd
from agent.engines.nghttp2.server_traces import GtlsServerTraces, NghttpdTraces, ServerTraces
from agent.engines.nghttp2.windows import WindowMapping, describe
from agent.engines.spec import DEFAULT_UNREPRESENTABLE_POLICY
from agent.errors import UsageError
from agent.event_trace import TraceWriter
from agent.workloads.periodic.spec import PERIODIC

if TYPE_CHECKING:
    from agent.engines.spec import UnrepresentablePolicy
    from agent.protocols import ProtocolSpec
    from agent.trial_request import TrialRequest
    from agent.workloads.spec import ParamValue, WorkloadSpec


def _warn_mapped(name: str, mapping: WindowMapping | None) -> None:
    if mapping is not None and not mapping.exact:
        print(f"h2iot-agent: warning: {describe(name, mapping)}", file=sys.stderr, flush=True)


def serve(
    args: argparse.Namespace,
    protocol: ProtocolSpec,
    workload: WorkloadSpec,
    params: dict[str, ParamValue],
    settings: dict[str, int],
) -> int:
    """nghttpd, or over QUIC gtlsserver, with the agent's trial accounting (the engine's
    `serve`; it serves files only, the page workload's, so `workload` and `params` ask
    nothing more of it)."""
    if args.root is None:
        raise UsageError(f"--root DIR (the site) is required for the {workload.kind} workload")
    tls = (args.cert, args.key) if protocol.tls else None
    writer = (
        None if args.events_dir is None else TraceWriter(args.events_dir, args.events_max_bytes)
    )
    traces: ServerTraces | None = None
    if protocol.quic:
        gtls_traces = None if writer is None else GtlsServerTraces(writer)
        program = _gtlsserver(args, settings, tls, protocol, gtls_traces)
        traces = gtls_traces
    else:
        options = NghttpdOptions.create(settings, args.unrepresentable_window)
        _warn_mapped("initial_window_size", options.stream_window)
        program = ServedProgram.nghttpd(
            options, args.root, args.host, args.port, tls, verbose=writer is not None
        )
        traces = None if writer is None else NghttpdTraces(writer)
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
                traces=traces,
            )
        )
    )


def _gtlsserver(
    args: argparse.Namespace,
    settings: dict[str, int],
    tls: tuple[Path, Path] | None,
    protocol: ProtocolSpec,
    traces: GtlsServerTraces | None,
) -> ServedProgram:
    from agent.engines.nghttp2.gtls import GtlsOptions  # noqa: PLC0415

    assert tls is not None
    files = (str(tls[0]), str(tls[1]))
    gtls = GtlsOptions.create(settings, None, args.datagram_size)
    qlog_dir = None if traces is None else str(traces.directory)
    return ServedProgram(
        "gtlsserver",
        lambda path: gtls.server_argv(
            path, str(args.root), args.host, args.port, files, qlog_dir=qlog_dir
        ),
        gtls.announced(),
        protocol.name,
    )


def fetch(request: TrialRequest, plan: RunPlan, protocol: ProtocolSpec) -> int:
    """nghttp's fetches, or over QUIC gtlsclient's (the engine's `trial`): the page's, or a
    process per exchange of the periodic workload's."""
    wait_until(request.start_at_s)
    options = plan.options
    if options.flow.window_update_policy != "half":
        raise UsageError(
            f"--window-update {options.flow.window_update_policy}: nghttp2 updates windows once "
            f"half is consumed (half); other policies need --engine {DEFAULT_ENGINE}"
        )
    if options.ca_file is not None:
        raise UsageError(
            f"--ca-file: nghttp does not verify certificates; use --engine {DEFAULT_ENGINE}"
        )
    if protocol.quic:
        from agent.engines.nghttp2.gtls import GtlsOptions  # noqa: PLC0415
        from agent.engines.nghttp2.gtls_client import run_gtls_fetches  # noqa: PLC0415

        gtls = GtlsOptions.create(
            dict(options.settings), options.flow.connection_window, options.datagram_bytes
        )
        if plan.workload == PERIODIC.kind:
            return run_gtls_periodic(plan, gtls)
        return run_gtls_fetches(plan, gtls)
    nghttp = NghttpOptions.create(
        options.settings,
        options.flow.connection_window,
        # The parser's choices checked it (a warm agent's request is parsed too).
        cast("UnrepresentablePolicy", request.unrepresentable_window)
        or DEFAULT_UNREPRESENTABLE_POLICY,
    )
    _warn_mapped("initial_window_size", nghttp.stream_window)
    _warn_mapped("--connection-window", nghttp.connection_window)
    if plan.workload == PERIODIC.kind:
        return run_nghttp_periodic(plan, nghttp)
    return run_nghttp_fetches(NghttpPlan(plan, nghttp))
