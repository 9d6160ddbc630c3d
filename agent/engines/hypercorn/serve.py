"""`h2iot-agent serve --engine hypercorn`: the api workload's app on hypercorn (the engine's
`serve`; agent.engines.hypercorn.server does the serving)."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.protocols import ProtocolSpec
    from agent.workloads.spec import ParamValue, WorkloadSpec


def serve(
    args: argparse.Namespace,
    protocol: ProtocolSpec,
    workload: WorkloadSpec,
    params: dict[str, ParamValue],
    settings: dict[str, int],
) -> int:
    from agent.engines.hypercorn.server import (  # noqa: PLC0415  (hypercorn: the api extra)
        HypercornServeOptions,
        serve_hypercorn,
    )

    options = HypercornServeOptions(
        root=args.root,
        params=params,
        host=args.host,
        port=args.port,
        settings=settings,
        tls=(args.cert, args.key) if protocol.tls else None,
        trial_log=args.trial_log,
        control_port=args.control_port or 0,
    )
    return asyncio.run(serve_hypercorn(options))
