"""`h2iot-agent warm`: a client agent that stays up for a sweep's trials (agent.warm)."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.commands import add_example


def configure(warm: argparse.ArgumentParser) -> None:
    warm.add_argument(
        "--ready-file",
        type=Path,
        required=True,
        help="where to write {port, token, pid} (mode 0600) once listening",
    )
    warm.add_argument(
        "--host", default="127.0.0.1", help="loopback address to listen on (default %(default)s)"
    )
    warm.add_argument(
        "--accept-timeout",
        type=float,
        default=60.0,
        help="exit when no controller connects within this many seconds (default %(default)s)",
    )
    add_example(warm, "h2iot-agent warm --ready-file /tmp/h2iot-warm.json")
    warm.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import importlib  # noqa: PLC0415

    from agent import warm  # noqa: PLC0415
    from agent.cli import main  # noqa: PLC0415

    # What every trial imports, before the agent says it is ready: the first trial then starts
    # as the others do, which an agreed start instant of several client nodes counts on.
    for module in (
        "agent.commands.trial",
        "agent.engines.builtin.trial",
        "agent.client.run",
        "agent.workloads.load",
    ):
        importlib.import_module(module)

    return warm.serve(args.ready_file, main, host=args.host, accept_timeout_s=args.accept_timeout)
