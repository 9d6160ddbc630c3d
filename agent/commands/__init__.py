"""The agent's subcommands, one module each: a `configure_*` function declares a command's
options, `run` does it.

`COMMANDS` names every command with its module and one-line help, so the CLI lists them all
without importing any: it imports only the module of the command it runs, and `--version`
(which the controller runs first to check a node) imports none. Each `run` imports what it
needs when it runs.

A `configure_*` function ends its parser's help with `add_example`: tests/agent/test_cli_help.py
parses every example, so one that drifts from the options fails there.
"""

from __future__ import annotations

import argparse

# command: ("module:configure function", help), in the order `--help` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "site": ("agent.commands.site:configure", "the test page"),
    "api-db": (
        "agent.commands.api_db:configure",
        "write the api workload's deterministic database (kept if already built)",
    ),
    "serve": ("agent.commands.serve:configure", "serve a workload over HTTP/2 or HTTP/3"),
    "fetch": (
        "agent.commands.trial:configure_fetch",
        "fetch a page and its subresources over HTTP/2",
    ),
    "trial": (
        "agent.commands.trial:configure_trial",
        "run trials of a workload over HTTP/2 or HTTP/3",
    ),
    "warm": (
        "agent.commands.warm:configure",
        "stay up and run the trials a controller sends (one process per sweep)",
    ),
    "workloads": (
        "agent.commands.workloads:configure",
        "list the workloads, their params and fields",
    ),
    "engines": ("agent.commands.engines:configure", "list the engines, what each runs"),
    "conditions": (
        "agent.commands.conditions:configure",
        "the node's CPU, thermal and memory state",
    ),
    "marker": ("agent.commands.marker:configure", "drive the trial marker line"),
}


def add_example(parser: argparse.ArgumentParser, command: str) -> None:
    """End `parser`'s help with an `example:` section: `command`, in full from `h2iot-agent` on."""
    parser.epilog = f"example:\n  {command}"
    # The default formatter would run the section's lines into one.
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
