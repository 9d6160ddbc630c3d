"""What several subcommands share: pinning, the engine options, the workload's params."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from agent.engines import BUILT_IN_ENGINES, DEFAULT_ENGINE, UNREPRESENTABLE_POLICIES, engines_where
from agent.engines.spec import DEFAULT_UNREPRESENTABLE_POLICY
from agent.errors import UsageError
from agent.protocols import PROTOCOLS, protocol_spec

if TYPE_CHECKING:
    from agent.engines import EngineSpec
    from agent.protocols import ProtocolSpec
    from agent.workloads.spec import ParamSide, ParamValue, WorkloadSpec


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        default=DEFAULT_ENGINE,
        help=f"what runs the protocol: {', '.join(BUILT_IN_ENGINES)} or an installed one "
        f"(`h2iot-agent engines` says what each is; default {DEFAULT_ENGINE})",
    )
    parser.add_argument(
        "--unrepresentable-window",
        choices=UNREPRESENTABLE_POLICIES,
        default=DEFAULT_UNREPRESENTABLE_POLICY,
        help="nghttp2 engine: a window that is not 2^N - 1 bytes is mapped to the nearest "
        "2^N - 1 (recorded, with a warning) or rejected (exit 2); default map",
    )


def add_quic_options(parser: argparse.ArgumentParser) -> None:
    """What an HTTP/3 endpoint takes beyond the SETTINGS (agent.h3.settings)."""
    parser.add_argument(
        "--datagram-size",
        type=int,
        metavar="BYTES",
        help="h3: the largest UDP payload this endpoint sends and takes (max_udp_payload_size; "
        "1200..65527, default 1350, fixed: no path-MTU probing)",
    )
    parser.add_argument(
        "--udp-buffer",
        type=int,
        metavar="BYTES",
        help="h3: SO_RCVBUF and SO_SNDBUF asked for (default 4 MiB; net.core.rmem_max and "
        "wmem_max are raised first where the node lets us), recorded with what was granted",
    )


def add_ack_options(parser: argparse.ArgumentParser) -> None:
    """When an HTTP/3 client acknowledges what it receives (agent.h3.ack_policy)."""
    parser.add_argument(
        "--ack-eliciting-threshold",
        type=int,
        metavar="PACKETS",
        help="h3: acknowledge at once after this many packets received (2..1000; default 2, "
        "RFC 9000's and qh3's own)",
    )
    parser.add_argument(
        "--max-ack-delay-ms",
        type=int,
        metavar="MS",
        help="h3: hold an acknowledgement at most this long, announced as max_ack_delay "
        "(1..16383; default 25, RFC 9000's: qh3 itself waits 1 ms)",
    )


def add_protocol_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        help="; ".join(f"{name}: {protocol_spec(name).doc}" for name in PROTOCOLS)
        + f" (default: {default}; a protocol's extra must be installed)",
    )


def check_engine(
    engine: EngineSpec, protocol: ProtocolSpec, workload: WorkloadSpec, *, client: bool
) -> None:
    """That `engine` runs this side of `workload` over `protocol`, else the one line saying
    which engines do."""
    if client and engine.serves_only:
        runs = " or ".join(engines_where(client=True))
        raise UsageError(f"--engine {engine.name} only serves; a client runs {runs}")
    if not engine.runs_workload(workload.kind, client=client):
        runs = " or ".join(engines_where(workload=workload.kind, client=client or None))
        raise UsageError(f"--engine {engine.name}: the {workload.kind} workload runs on {runs}")
    if not workload.runs_protocol(protocol.name):
        raise UsageError(
            f"the {workload.kind} workload does not run over {protocol.name} "
            f"(--protocol {protocol.name})"
        )
    if not engine.runs_protocol(protocol.name):
        runs = " or ".join(engines_where(protocol=protocol.name))
        raise UsageError(f"--protocol {protocol.name} runs on --engine {runs}, not {engine.name}")


def check_udp_buffer(udp_buffer_bytes: int | None) -> None:
    """--udp-buffer, when given, asks the kernel for at least one byte."""
    if udp_buffer_bytes is not None and udp_buffer_bytes < 1:
        raise UsageError(f"--udp-buffer {udp_buffer_bytes} must be at least 1 byte")


def add_workload_options(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--workload",
        metavar="KIND",
        default=default,
        required=default is None,
        help="what a trial does (`h2iot-agent workloads` lists them)"
        + (f"; default {default}" if default else ""),
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one of the workload's parameters (repeatable)",
    )


def workload_params(
    spec: WorkloadSpec, args: argparse.Namespace, side: ParamSide
) -> dict[str, ParamValue]:
    """The workload's `side` params from `--param`, checked."""
    from agent.workloads.params import parse_params  # noqa: PLC0415  (not for `conditions`)

    return parse_params(spec, args.param, side)


def pin(cpu: int | None) -> None:
    if cpu is None:
        return
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError) as exc:
        raise UsageError(f"--cpu {cpu}: cannot pin to that core ({exc})") from None
