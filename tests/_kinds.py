"""What the kind-literal tests share (tests/test_workload_kinds.py, test_meter_source_kinds.py):
a kind is declared once, so its name appears as a string literal only in its own places and its
registry. Read from the code with `ast`, as the dependency rule (tests/test_dependency_rule.py)
is."""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "controller", "analysis")


def kind_literals(path: Path, names: Collection[str]) -> list[tuple[int, str]]:
    """(line, literal) of every string constant in the file that is one of `names`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def stray_literals(
    names: Collection[str],
    owner: Callable[[str], str | Collection[str] | None],
    skip: Collection[str],
) -> list[str]:
    """`path:line: 'name'` for each name written outside its owner's place (`owner(path)`, the
    kind, or the kinds, a repository path belongs to) in the project's packages, the files in
    `skip` aside."""
    stray = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name in skip:
                continue
            owned = owner(name)
            allowed = {owned} if isinstance(owned, str) else set(owned or ())
            stray += [
                f"{name}:{line}: {kind!r}"
                for line, kind in kind_literals(path, names)
                if kind not in allowed
            ]
    return stray
