"""Options more than one `h2iot` subcommand takes, spelled and explained the same in each."""

from __future__ import annotations

import argparse


def add_overrides(parser: argparse.ArgumentParser) -> None:
    """`--set KEY=VALUE`, repeatable, into `args.overrides`."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (dotted), like h2iot sweep",
    )


def add_accept_new_host_key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="first contact: record an unknown host's key (printing its fingerprint)",
    )
