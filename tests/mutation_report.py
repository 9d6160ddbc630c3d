"""The table `make mutation` prints from mutmut's results in mutants/: per mutated module, its
mutants, how many were killed (a timeout is a kill: the mutant made its tests loop), how many
survived (no test reaching the mutated function counts as surviving), and of the survivors those judged equivalent, then every survivor by name.

Exit status 1 when a module kills less than TARGET of its mutants that are not equivalent, or
when a mutant was not checked. A mutant is equivalent when no input can tell it from the
original (read with `mutmut show NAME`); EQUIVALENT names each with the reason.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TARGET = 0.90
KILLED = {1, 3, 24, -24, 36, 152, 255}  # mutmut's exit codes: a test failed, errors, timeouts
SURVIVED = 0
NO_TESTS = {5, 33}  # no selected test runs the mutated function: not a kill

EQUIVALENT: dict[str, str] = {}


@dataclass(frozen=True)
class Module:
    name: str
    mutants: int
    tally: Counter[str]
    survivors: tuple[str, ...]

    @property
    def equivalent(self) -> int:
        return sum(1 for name in self.survivors if name in EQUIVALENT)

    @property
    def score(self) -> float:
        judged = self.mutants - self.equivalent
        return self.tally["killed"] / judged if judged else 1.0


def _status(code: int | None) -> str:
    if code in KILLED:
        return "killed"
    if code in NO_TESTS:
        return "no tests"
    return "survived" if code == SURVIVED else "not checked"


def read_results(root: Path) -> list[Module]:
    modules = []
    for meta in sorted(root.rglob("*.py.meta")):
        codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        if codes:
            name = ".".join(meta.relative_to(root).with_suffix("").with_suffix("").parts)
            survivors = tuple(
                sorted(key for key, code in codes.items() if code == SURVIVED or code in NO_TESTS)
            )
            tally = Counter(_status(code) for code in codes.values())
            modules.append(Module(name, len(codes), tally, survivors))
    return modules


def main() -> int:
    modules = read_results(Path("mutants"))
    print(f"{'module':28} {'mutants':>7} {'killed':>6} {'survived':>8} {'equivalent':>10}  score")
    for m in modules:
        unchecked = f"  ({m.tally['not checked']} not checked)" if m.tally["not checked"] else ""
        survived = m.tally["survived"] + m.tally["no tests"]
        print(
            f"{m.name:28} {m.mutants:7} {m.tally['killed']:6} {survived:8} "
            f"{m.equivalent:10}  {m.score:.1%}{unchecked}"
        )
    print("score: killed / (mutants - equivalent); survivors:")
    for name in (name for m in modules for name in m.survivors):
        reason = EQUIVALENT.get(name)
        print(f"  equivalent {name}: {reason}" if reason else f"  SURVIVED   {name}")
    failed = any(m.score < TARGET or m.tally["not checked"] for m in modules)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
