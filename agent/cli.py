"""The `h2iot-agent` command: `site build`, `serve`, `fetch`, `trial`, `workloads`,
`conditions`, `marker pulse`.

Exit status: 0 success, 1 a failed trial or an outside failure, 2 a usage error (bad option,
setting, param, file); every error is one line on stderr naming what is at fault.

Each command imports what it needs when it runs (agent/commands/): the controller checks a
node with `--version` first, which then stays near a bare interpreter's memory (about 9 MiB,
against 12 with asyncio), so a small device's memory limit is spent on the measured trial, not
on start-up.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from agent import __version__
from agent.commands import conditions, marker, serve, site, trial, workloads
from agent.errors import AgentError, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse that exits with status 2 and one line, like the rest of the agent's errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="h2iot-agent", description="h2iot node agent (HTTP/2 over h2)")
    parser.add_argument("--version", action="version", version=f"h2iot-agent {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in (site, serve, trial, workloads, conditions, marker):
        command.register(commands)
    return parser


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
