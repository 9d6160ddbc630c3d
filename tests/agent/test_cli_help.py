"""`h2iot-agent --help` opens with what the agent is for and the first three commands, without
importing a command; every command's help, at every level, ends with an example that parses."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agent.cli import build_parser
from agent.commands import COMMANDS
from agent.errors import UsageError

PROG = "h2iot-agent"


def _subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every subcommand below `parser`, depth first, with its words after the program name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield (*path, name), subparser
                yield from _subcommands(subparser, (*path, name))


def _command_parsers() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    # A command's options (and its own subcommands) exist only in the parser built for it.
    for name in COMMANDS:
        for path, subparser in _subcommands(build_parser(name)):
            if path[0] == name:
                yield path, subparser


SUBCOMMANDS = dict(_command_parsers())


def _example_section(text: str) -> list[str]:
    """The commands of the help's last section, which must be `example:`."""
    lines = text.rstrip().splitlines()
    assert "example:" in lines, text
    start = len(lines) - lines[::-1].index("example:")
    commands = [line.strip() for line in lines[start:]]
    assert commands, text
    return commands


def _options_along(parser: argparse.ArgumentParser, words: list[str]) -> set[str]:
    """The option strings of `parser` and of each subcommand `words` descend into."""
    options: set[str] = set()
    for word in words:
        options.update(s for action in parser._actions for s in action.option_strings)
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subcommands or word not in subcommands[0].choices:
            break
        parser = subcommands[0].choices[word]
    return options


def _parses(command: str) -> list[str]:
    """The example's words after the program name, once `h2iot-agent` has parsed them."""
    words = command.split()
    assert words[0] == PROG, command
    parser = build_parser(words[1])
    # argparse takes `--sample` for `--sample-s`: an example spells each option in full.
    options = _options_along(parser, words[1:])
    for word in words:
        if word.startswith("-"):
            assert word.split("=")[0] in options, f"{command!r}: {word} is no option of it"
    try:
        parser.parse_args(words[1:])
    except UsageError as exc:
        pytest.fail(f"{command!r} does not parse: {exc}")
    except SystemExit as exc:  # --help, --version
        pytest.fail(f"{command!r} exits (status {exc.code}) instead of running")
    return words[1:]


def test_every_command_and_action_is_checked() -> None:
    assert {(name,) for name in COMMANDS} <= set(SUBCOMMANDS)
    assert {("site", "build"), ("marker", "pulse")} <= set(SUBCOMMANDS)


@pytest.mark.parametrize("path", list(SUBCOMMANDS), ids=" ".join)
def test_help_ends_with_an_example_of_that_command(path: tuple[str, ...]) -> None:
    for command in _example_section(SUBCOMMANDS[path].format_help()):
        words = _parses(command)
        assert tuple(words[: len(path)]) == path, command


def test_help_opens_with_the_purpose_and_the_first_three_commands() -> None:
    text = build_parser(None).format_help()
    description = text.split("\n\n", 2)[1]  # after the usage line
    assert description.startswith("The h2iot node agent: the HTTP/2 server and client")
    for fact in ("each node", "The controller (h2iot) drives it", "by hand"):
        assert fact in " ".join(description.split()), fact
    firsts = [line.strip() for line in text.splitlines() if line.strip().startswith(f"{PROG} ")]
    assert [_parses(command) for command in firsts] == [
        ["site", "build", "/tmp/site"],
        ["serve", "--root", "/tmp/site", "--port", "8443"],
        ["fetch", "http://127.0.0.1:8443/"],
    ]
    # The first commands come before the list of every command.
    assert text.index(firsts[-1]) < text.index("positional arguments:")


def test_the_first_fetch_asks_the_first_server() -> None:
    serve = build_parser("serve").parse_args(["serve", "--root", "/tmp/site", "--port", "8443"])
    assert f"http://{serve.host}:{serve.port}/" == "http://127.0.0.1:8443/"
    assert not serve.tls


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_the_top_level_imports_no_command(argv: list[str]) -> None:
    # The listing comes from agent.commands.COMMANDS; a command's module is for that command.
    probe = (
        "import contextlib, io, sys\nfrom agent.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(sys.argv[1:])\n    except SystemExit:\n        pass\n"
        "print(' '.join(m for m in sys.modules if m.startswith('agent.commands.')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == []
