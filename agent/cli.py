"""The `h2iot-agent` command: `site build`, `api-db`, `serve`, `fetch`, `trial`, `workloads`,
`conditions`, `marker pulse`.

Exit status: 0 success, 1 a failed trial or an outside failure, 2 a usage error (bad option,
setting, param, file); every error is one line on stderr naming what is at fault.

Only the command that runs is imported (agent/commands/COMMANDS lists the others by name): the
controller checks a node with `--version` first, which then stays near a bare interpreter's
CPU and memory, and a trial's process spends its start-up on the trial's own modules, so a
small device's time and memory go to the measured trial.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from agent import __version__
from agent.commands import COMMANDS
from agent.errors import AgentError, UsageError

DESCRIPTION = """\
The h2iot node agent: the HTTP/2 server and client of the study's workloads, run on
each node (a Raspberry Pi, or a local process). The controller (h2iot) drives it for
every trial, over SSH or locally; by hand it serves and fetches the same workloads.

first commands:
  write the page workload's test site (a page and its 7 subresources, about 7 MB):
    h2iot-agent site build /tmp/site
  serve it over HTTP/2 (cleartext, on 127.0.0.1):
    h2iot-agent serve --root /tmp/site --port 8443
  from another shell, fetch the page and its subresources, every body verified:
    h2iot-agent fetch http://127.0.0.1:8443/"""

EPILOG = """\
Each command's --help gives its options and an example. Exit status: 0 success, 1 a
failed trial or an outside failure, 2 a usage error; an error is one line on stderr."""


class _Parser(argparse.ArgumentParser):
    """argparse that exits with status 2 and one line, like the rest of the agent's errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """Every command is listed; only `command` gets its options (none for `--version`)."""
    parser = _Parser(
        prog="h2iot-agent",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"h2iot-agent {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (target, help_text) in COMMANDS.items():
        subparser = commands.add_parser(name, help=help_text)
        if name == command:
            module, function = target.split(":")
            getattr(importlib.import_module(module), function)(subparser)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    # The top level's options take no values, so the first other word is the command.
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_named(words))
    try:
        args = parser.parse_args(words)
        import logging  # noqa: PLC0415  (not needed by --version or a usage error)

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
