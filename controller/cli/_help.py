"""How every `h2iot` help text ends: an `example:` section, the command on the line below.

tests/controller/test_cli_help.py walks every subcommand and parses each example, so an
example that drifts from the options fails there.
"""

from __future__ import annotations

import argparse

# Keeps the description's paragraphs and the example's lines as written (the default
# formatter would run the example into one line).
FORMATTER = argparse.RawDescriptionHelpFormatter


def example(command: str) -> str:
    """The epilog of a subcommand's help: `command`, written in full from `h2iot` on."""
    return f"example:\n  {command}"
