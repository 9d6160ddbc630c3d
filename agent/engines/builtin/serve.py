"""`h2iot-agent serve` on the builtin engine: the agent's own server over HTTP/2 (h2) or, over
QUIC, HTTP/3 (qh3), with the workload's handlers mounted."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agent.errors import UsageError
from agent.event_loop import run_on
from agent.event_trace import TraceWriter
from agent.limits import (
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    H2_TLS_CONNECTION_BYTES,
    H2C_CONNECTION_BYTES,
    ConnectionLimits,
    connection_budget_bytes,
    default_max_connections,
)
from agent.workloads.load import server_mount

if TYPE_CHECKING:
    from agent.h3.settings import QuicWindows
    from agent.protocols import ProtocolSpec
    from agent.workloads.spec import ParamValue, WorkloadSpec


def serve(
    args: argparse.Namespace,
    protocol: ProtocolSpec,
    workload: WorkloadSpec,
    params: dict[str, ParamValue],
    settings: dict[str, int],
) -> int:
    traces = _traces(args)
    if protocol.quic:
        return _serve_quic(args, protocol, workload, params, settings, traces=traces)
    limits = connection_limits(args, tls=protocol.tls)
    from agent.server.app import ServerOptions  # noqa: PLC0415
    from agent.server.app import serve as serve_h2  # noqa: PLC0415

    handler = server_mount(workload.kind)(args.root, params)
    options = ServerOptions(
        host=args.host,
        port=args.port,
        settings=settings,
        tls_cert=args.cert if protocol.tls else None,
        tls_key=args.key if protocol.tls else None,
        trial_log=args.trial_log,
        workload=workload.kind,
        limits=limits,
        settings_file=args.settings_file,
        protocol=protocol.name,
        traces=traces,
        control_port=args.control_port,
    )
    return run_on(args.event_loop, lambda: serve_h2(options, handler))


def _traces(args: argparse.Namespace) -> TraceWriter | None:
    if args.events_dir is None:
        return None
    return TraceWriter(args.events_dir, args.events_max_bytes)


def _serve_quic(
    args: argparse.Namespace,
    protocol: ProtocolSpec,
    workload: WorkloadSpec,
    params: dict[str, ParamValue],
    settings: dict[str, int],
    *,
    traces: TraceWriter | None,
) -> int:
    protocol.require_stack()
    from agent.h3.admission import h3_limits  # noqa: PLC0415
    from agent.h3.amplification import AmplificationFixes  # noqa: PLC0415
    from agent.h3.tickets import DEFAULT_LIFETIME_S  # noqa: PLC0415
    from agent.server.h3 import H3ServeOptions, serve_h3  # noqa: PLC0415

    limits = connection_limits(args, tls=protocol.tls)
    windows = _server_windows(args, settings)
    handler = server_mount(workload.kind)(args.root, params)
    options = H3ServeOptions(
        windows=windows,
        cert=args.cert,
        key=args.key,
        limits=h3_limits(
            args.connection_memory or connection_budget_bytes(),
            windows.connection_window_bytes,
            max_connections=args.max_connections,
            handshake_timeout_s=limits.handshake_timeout_s,
        ),
        host=args.host,
        port=args.port,
        trial_log=args.trial_log,
        workload=workload.kind,
        fixes=AmplificationFixes(
            count_padding=args.quic_count_padding,
            capacity_as_blocked=args.quic_capacity_as_blocked,
            retry=args.quic_retry,
        ),
        idle_timeout_s=limits.idle_timeout_s,
        buffer_bytes=args.udp_buffer,
        ticket_lifetime_s=args.ticket_lifetime or DEFAULT_LIFETIME_S,
        traces=traces,
        control_port=args.control_port,
    )
    return run_on(args.event_loop, lambda: serve_h3(options, handler))


def _server_windows(args: argparse.Namespace, settings: dict[str, int]) -> QuicWindows:
    """The HTTP/2-named `settings` as an HTTP/3 server's (a setting without a counterpart
    refused, naming it), with --datagram-size. A server receives only requests: its connection
    window is its stream window, as an HTTP/2 server's is 65535."""
    from agent.h2.settings import DEFAULT_INITIAL_WINDOW_SIZE  # noqa: PLC0415
    from agent.h3.settings import QuicWindows  # noqa: PLC0415

    return QuicWindows.from_settings(
        settings,
        default_stream_window_bytes=DEFAULT_INITIAL_WINDOW_SIZE,
        connection_window_bytes=settings.get("initial_window_size", DEFAULT_INITIAL_WINDOW_SIZE),
        datagram_bytes=args.datagram_size,
    )


def connection_limits(args: argparse.Namespace, tls: bool) -> ConnectionLimits:
    """The engine's connection limits from the command line, each checked here, once; the
    default cap for connections over TLS if `tls`, else in cleartext (agent.limits)."""
    handshake_timeout_s = _seconds("--handshake-timeout", args.handshake_timeout)
    idle_timeout_s = _seconds("--idle-timeout", args.idle_timeout)
    if args.max_connections is not None and args.max_connections < 1:
        raise UsageError(f"--max-connections {args.max_connections} must be at least 1")
    if args.connection_memory is not None and args.connection_memory < 1:
        raise UsageError(f"--connection-memory {args.connection_memory} must be at least 1 byte")
    return ConnectionLimits(
        handshake_timeout_s=handshake_timeout_s or DEFAULT_HANDSHAKE_TIMEOUT_S,
        idle_timeout_s=idle_timeout_s or DEFAULT_IDLE_TIMEOUT_S,
        max_connections=args.max_connections
        or default_max_connections(
            budget_bytes=args.connection_memory,
            connection_bytes=H2_TLS_CONNECTION_BYTES if tls else H2C_CONNECTION_BYTES,
        ),
    )


def _seconds(option: str, value: float | None) -> float | None:
    if value is not None and not 0 < value < float("inf"):
        raise UsageError(f"{option} {value:g} must be a positive number of seconds")
    return value
