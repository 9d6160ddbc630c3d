"""Reading what `h2iot rig check` printed: a verdict per line, then the tally."""

from __future__ import annotations

import re

LINE = re.compile(r"^(PASS|WARN|FAIL|UNAVAILABLE) +(\S.*?) {2,}(\S.*)$")


def verdicts(stdout: str) -> dict[str, tuple[str, str]]:
    """check name -> (status, detail); the last line is the tally."""
    *lines, tally = stdout.strip().splitlines()
    found = {}
    for line in lines:
        match = LINE.match(line)
        assert match, line
        found[match.group(2).strip()] = (match.group(1), match.group(3))
    assert re.fullmatch(r"\d+ pass, \d+ warn, \d+ fail, \d+ unavailable", tally), tally
    return found
