"""`h2iot --help` opens with what the tool is for and the first three commands; every
subcommand's help, at every level, ends with an example that parses."""

from __future__ import annotations

import argparse
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import controller.cli
from controller.cli import COMMANDS, build_parser
from controller.config import load_config

PROG = "h2iot"
ROOT = Path(__file__).resolve().parents[2]


def _subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every subcommand below `parser`, depth first, with its words after the program name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield (*path, name), subparser
                yield from _subcommands(subparser, (*path, name))


SUBCOMMANDS = dict(_subcommands(build_parser()))


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
    """The example's words after the program name, once `h2iot` has parsed them."""
    words = command.split()
    assert words[0] == PROG, command
    parser = build_parser()
    # argparse takes `--marke` for `--marker`: an example spells each option in full.
    options = _options_along(parser, words[1:])
    for word in words:
        if word.startswith("-"):
            assert word.split("=")[0] in options, f"{command!r}: {word} is no option of it"
        if word.startswith("configs/"):
            assert (ROOT / word).is_file(), f"{command!r}: no {word} in the repository"
    try:
        parser.parse_args(words[1:])
    except SystemExit as exc:  # argparse's usage error (status 2) and --help alike
        pytest.fail(f"{command!r} does not parse (exit {exc.code})")
    return words[1:]


def test_every_level_has_subcommands_to_check() -> None:
    assert {("sweep",), ("report",), ("rig", "check"), ("nodes", "deploy")} <= set(SUBCOMMANDS)


@pytest.mark.parametrize("path", list(SUBCOMMANDS), ids=" ".join)
def test_help_ends_with_an_example_of_that_subcommand(path: tuple[str, ...]) -> None:
    for command in _example_section(SUBCOMMANDS[path].format_help()):
        words = _parses(command)
        assert tuple(words[: len(path)]) == path, command


def test_help_opens_with_the_purpose_and_the_first_three_commands() -> None:
    text = build_parser().format_help()
    description = text.split("\n\n", 2)[1]  # after the usage line
    assert description.startswith("Measure what HTTP/2 settings cost"), description
    assert "IoT nodes" in description
    assert "developer" not in text
    assert "register(" not in text
    firsts = [line.strip() for line in text.splitlines() if line.strip().startswith(f"{PROG} ")]
    assert [tuple(_parses(command)[:2]) for command in firsts] == [
        ("sweep", "configs/local.toml"),
        ("report", "data/runs/h2iot-20261129T185148"),
        ("rig", "check"),
    ]
    # The first commands come before the list of every command.
    assert text.index(firsts[-1]) < text.index("positional arguments:")


def test_the_report_example_names_a_folder_where_the_local_sweep_puts_its_runs() -> None:
    parser = build_parser()
    sweep = parser.parse_args(["sweep", "configs/local.toml"])
    report = parser.parse_args(["report", "data/runs/h2iot-20261129T185148"])
    (run_dir,) = report.run_dirs
    assert run_dir.parent == sweep.out
    assert run_dir.name.startswith(f"{load_config(ROOT / sweep.config).run.name}-")


def test_every_subcommand_module_is_listed_and_only_the_one_that_runs_is_imported() -> None:
    modules = {info.name for info in pkgutil.iter_modules(controller.cli.__path__)}
    assert set(COMMANDS) == {name for name in modules if not name.startswith("_")}
    probe = (
        "import sys\nfrom controller.cli import main\ntry:\n    main(sys.argv[1:])\n"
        "except SystemExit:\n    pass\nprint(' '.join(m for m in sys.modules), file=sys.stderr)"
    )

    def loaded(*argv: str) -> set[str]:
        result = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True
        )
        return set(result.stderr.split())

    version = loaded("--version")
    assert not {f"controller.cli.{name}" for name in COMMANDS} & version
    assert not {"fabric", "paramiko", "matplotlib"} & version
    report = loaded("report", "--help")
    assert "controller.cli.report" in report
    assert not {"controller.cli.sweep", "controller.cli.nodes", "fabric"} & report
