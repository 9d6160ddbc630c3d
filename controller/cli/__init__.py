"""The `h2iot` command: one module per subcommand, each exposing `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable, Sequence

from agent import __version__

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="h2iot", description=__doc__)
    parser.add_argument("--version", action="version", version=f"h2iot {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Discovering the subcommand modules keeps this file untouched when a subcommand is added.
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
