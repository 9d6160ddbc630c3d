"""Where a report.md's first results stand: the line of its headline figure and of the first
table after it (the findings), 1-based. The issue's rule: a reader meets both on the first
screen, within FIRST_SCREEN_LINES lines."""

from __future__ import annotations

import re

FIRST_SCREEN_LINES = 40


def headline_line(markdown: str) -> tuple[int, str]:
    """(line, stem) of the first figure."""
    for number, line in enumerate(markdown.splitlines(), start=1):
        found = re.match(r"!\[([^\]]*)\]\(", line)
        if found:
            return number, found.group(1)
    raise AssertionError("no figure in the report")


def findings_line(markdown: str) -> int:
    """The first table's header line."""
    for number, line in enumerate(markdown.splitlines(), start=1):
        if line.startswith("| "):
            return number
    raise AssertionError("no table in the report")


def assert_results_first(markdown: str, stem: str) -> None:
    """The headline figure is `stem`, and it and the findings open the report."""
    figure, drawn = headline_line(markdown)
    table = findings_line(markdown)
    head = "\n".join(markdown.splitlines()[:FIRST_SCREEN_LINES])
    assert drawn == stem, head
    assert figure <= FIRST_SCREEN_LINES and figure < table <= FIRST_SCREEN_LINES, head
