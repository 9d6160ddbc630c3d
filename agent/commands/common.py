"""What several subcommands share: pinning, the engine options, the workload's params."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from agent.engines import DEFAULT_ENGINE, ENGINES, UNREPRESENTABLE_POLICIES
from agent.errors import UsageError

if TYPE_CHECKING:
    from agent.workloads.spec import ParamSide, ParamValue, WorkloadSpec


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=DEFAULT_ENGINE,
        help="HTTP/2 implementation: this agent's own (h2), the study's nghttp2 tools "
        "(nghttp / nghttpd), or hypercorn + Starlette (serve, api workload); default h2",
    )
    parser.add_argument(
        "--unrepresentable-window",
        choices=UNREPRESENTABLE_POLICIES,
        default="map",
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


def check_udp_buffer(args: argparse.Namespace) -> None:
    """--udp-buffer, when given, asks the kernel for at least one byte."""
    if args.udp_buffer is not None and args.udp_buffer < 1:
        raise UsageError(f"--udp-buffer {args.udp_buffer} must be at least 1 byte")


def require_h3() -> None:
    """qh3 importable, else the one line that says how to get it."""
    import importlib.util  # noqa: PLC0415

    if importlib.util.find_spec("qh3") is None:
        raise UsageError("--protocol h3 needs the agent's h3 extra: pip install 'h2iot[h3]'")


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
    """The workload's `side` params from `--param`, checked; and the engine it can run on."""
    if args.engine not in spec.engines:
        raise UsageError(
            f"--engine {args.engine}: the {spec.kind} workload runs on {', '.join(spec.engines)}"
        )
    from agent.workloads.params import parse_params  # noqa: PLC0415  (not for `conditions`)

    return parse_params(spec, args.param, side)


def pin(cpu: int | None) -> None:
    if cpu is None:
        return
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError) as exc:
        raise UsageError(f"--cpu {cpu}: cannot pin to that core ({exc})") from None
