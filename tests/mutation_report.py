"""The table `make mutation` prints from mutmut's results in mutants/: per mutated module, its
mutants, how many were killed (a timeout is a kill: the mutant made its tests loop), how many
survived (no test reaching the mutated function counts as surviving), and of the survivors those
judged equivalent, then every survivor by name.

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

EQUIVALENT: dict[str, str] = {
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_11": (
        "`end > 1` for `end > 0`: an intact frame's end is at least 9"
    ),
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_24": (
        "`while j > 0`: j is found from i + 1 >= 1 on, so it is never 0"
    ),
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_25": (
        "`while j >= 1`: j is found from i + 1 >= 1 on, so it is never 0"
    ),
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_36": (
        "`inner > 1` for `inner > 0`: an intact frame's end is at least 9"
    ),
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_21": (
        "searching from i + 2: buf[i + 1] is 0x5A, so no sync word starts there"
    ),
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_55": (
        "searching from j + 2: buf[j + 1] is 0x5A, so no sync word starts there"
    ),
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_45": (
        "returns -2 for -1: the caller takes any negative as 'need more bytes'"
    ),
    "controller.meter.decoder.xǁ_Scannerǁ_check_candidate__mutmut_61": (
        "returns -2 for -1: the caller takes any negative as 'need more bytes'"
    ),
    "controller.meter.decoder.xǁ_Scannerǁfeed__mutmut_4": (
        "final=None for final=False: both falsy, only truth is tested"
    ),
    "controller.meter.decoder.xǁ_Scannerǁfeed__mutmut_8": (
        "always `self._buf + data`: b'' + data is bytes(data)"
    ),
    "controller.meter.protocol.x_parse_samples__mutmut_40": (
        "reshape(-2, c): numpy infers the dimension for any negative size"
    ),
    "controller.meter.protocol.xǁInfoǁparse__mutmut_15": (
        "codec 'ASCII' for 'ascii': codec names are case-insensitive"
    ),
    "controller.meter.protocol.xǁInfoǁpayload__mutmut_30": (
        "codec 'ASCII' for 'ascii': codec names are case-insensitive"
    ),
    "controller.meter.protocol.xǁSamplesǁpayload__mutmut_8": (
        "astype's copy flag: only whether numpy copies, not the bytes"
    ),
    "controller.meter.protocol.xǁSamplesǁpayload__mutmut_10": (
        "astype's copy flag: only whether numpy copies, not the bytes"
    ),
    "controller.meter.protocol.xǁSamplesǁpayload__mutmut_13": (
        "astype's copy flag: only whether numpy copies, not the bytes"
    ),
    "controller.energy.x_energy_in_window__mutmut_71": (
        "edges[1] for edges[0] when the window is empty: both edges are one instant"
    ),
    "analysis.stats.x_cochran_sample_size__mutmut_7": (
        "ndtri((1 - c) / 2) is -z, and only z squared is used"
    ),
    "analysis.stats.x_repetitions_for_relative_half_width__mutmut_12": (
        "ndtri((1 - c) / 2) is -z, and the result is squared"
    ),
    "analysis.stats.x_summarize__mutmut_3": (
        "dtype None: numbers become int64 or float64 and every result goes through float()"
    ),
    "analysis.stats.x_summarize__mutmut_5": ("dtype left out: as dtype None"),
    "agent.h2.flow.xǁReceiveWindowǁ__init____mutmut_29": (
        "exhausted threshold max(2, target): for target <= 1, allowance <= 0 < deficit "
        "holds exactly when deficit >= 1"
    ),
    "agent.h2.flow.xǁReceiveWindowǁconsume__mutmut_7": (
        "allowance < 0 for <= 0: at allowance 0 the deficit is the target, already >= "
        "the threshold (or both are 0)"
    ),
    "agent.h2.flow.xǁReceiveWindowǁconsume__mutmut_9": (
        "0 <= deficit: adds only deficit 0 with allowance <= 0 (target == allowance): "
        "the same allowance is restored and 0 returned"
    ),
    "agent.h2.flow.xǁReceiveWindowǁopening_increment__mutmut_1": (
        "target >= allowance: at equality the increment is 0 and the allowance unchanged"
    ),
}


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
