"""The `h2iot` command: one module per subcommand, each exposing `register(subparsers)`.

Each subcommand module is named in `COMMANDS` with its one-line help, and only the one that
runs is imported. What `h2iot --help` says to its users is `DESCRIPTION` below.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from agent import __version__
from controller.cli._help import FORMATTER

Handler = Callable[[argparse.Namespace], int]

DESCRIPTION = """\
Measure what HTTP/2 settings cost on Raspberry-Pi-class IoT nodes: response time,
CPU, memory and energy. h2iot runs a sweep of settings over the node agents
(h2iot-agent, locally or over SSH), reads the nodes' power from a current meter,
records each run in a folder under data/runs/, and turns a run into a report.

first commands:
  a sweep with no hardware (two local agents, the virtual meter; a few minutes):
    h2iot sweep configs/local.toml
  its report (report.md, report.html, figures) in the run folder it printed:
    h2iot report data/runs/h2iot-20261129T185148
  the bench a config describes (meter, marker wire, nodes), one line per check:
    h2iot rig check configs/local.toml"""

# command: its one-line help. Only the command that runs is imported (`--version` imports
# none): each module's imports (fabric, matplotlib, the firmware builder) cost a second
# and more of CPU that every `h2iot` invocation paid. tests/controller/test_cli_help.py
# checks that every module here is listed.
COMMANDS: dict[str, str] = {
    "firmware": "build or flash the meter firmware",
    "meter": "the current meter",
    "nodes": "deploy the agent to the nodes, check the nodes",
    "plan": "the repetitions a sweep needs to detect a difference in energy, from a pilot run",
    "report": "write report.md, report.html, summary.csv and figures for recorded runs",
    "rig": "check the bench: meter, marker wire, nodes",
    "sweep": "run a sweep of HTTP/2 settings",
}

EPILOG = """\
Each command's --help gives its options and an example; configs/README.md
documents every config key."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command is listed; only `command` gets its options (none for `--version`; all
    of them when None, for the help tests)."""
    parser = argparse.ArgumentParser(
        prog="h2iot", description=DESCRIPTION, epilog=EPILOG, formatter_class=FORMATTER
    )
    parser.add_argument("--version", action="version", version=f"h2iot {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(f"{__name__}.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=help_text)
    return parser


def _command_named(argv: Sequence[str]) -> str:
    # The top level's options take no values, so the first other word is the command; ""
    # (no command: `--version`, `--help`, a usage error) configures none.
    return next((word for word in argv if not word.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_named(words))
    args = parser.parse_args(words)
    handler: Handler = args.handler
    return handler(args)
