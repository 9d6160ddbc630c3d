"""The `h2iot` command: one module per subcommand, each exposing `register(subparsers)`.

The subcommand modules are discovered (any module here not starting with `_`), so adding one
leaves this file untouched. What `h2iot --help` says to its users is `DESCRIPTION` below.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
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

EPILOG = """\
Each command's --help gives its options and an example; configs/README.md
documents every config key."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="h2iot", description=DESCRIPTION, epilog=EPILOG, formatter_class=FORMATTER
    )
    parser.add_argument("--version", action="version", version=f"h2iot {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)
