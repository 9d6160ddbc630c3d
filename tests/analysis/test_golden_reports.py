"""Each workload's report matches its golden copy (tests/analysis/golden_reports): report.md
byte for byte, summary.csv cell for cell with its floating-point cells to 1e-9 of their row.

summary.csv carries full-precision floats, and the frame model's least-squares fits differ in
their last digits from one CPU to another (the BLAS kernel numpy picks): a fresh CI machine
failed a byte comparison on digits 14-16 of frame_model rows that this machine had written.
Anything a reader sees (report.md's rounded figures, every text cell, every row and column)
is still compared exactly."""

from __future__ import annotations

import csv
import difflib
import io
import math
from pathlib import Path

import pytest

from tests.analysis.golden_reports import COMPARED, GOLDEN_DIR, KINDS, report_of

RELATIVE_TO_ROW = 1e-9


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _cells_agree(golden: list[str], made: list[str]) -> bool:
    if len(golden) != len(made):
        return False
    numbers = [_number(c) for c in golden if _number(c) is not None]
    scale = max((abs(x) for x in numbers if math.isfinite(x)), default=0.0)
    for want, got in zip(golden, made, strict=True):
        a, b = _number(want), _number(got)
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            if want != got:
                return False
        elif not math.isclose(a, b, rel_tol=RELATIVE_TO_ROW, abs_tol=RELATIVE_TO_ROW * scale):
            return False
    return True


def _same(name: str, golden: str, made: str) -> bool:
    if not name.endswith(".csv"):
        return made == golden
    rows = [list(csv.reader(io.StringIO(text))) for text in (golden, made)]
    return len(rows[0]) == len(rows[1]) and all(
        _cells_agree(g, m) for g, m in zip(*rows, strict=True)
    )


def test_a_csv_row_agrees_within_its_scale_and_text_cells_exactly() -> None:
    row = ["frame_model:cpu_us:ms", "", "6", "474.3141721820305", "1574.99703471819"]
    assert _cells_agree(row, [*row[:3], "474.31417218202847", "1574.9970347182007"])
    assert not _cells_agree(row, [*row[:3], "474.3142", "1574.99703471819"])
    assert not _cells_agree(row, ["frame_model:cpu_us:s", *row[1:]])
    assert not _cells_agree(row, row[:-1])
    assert not _same("summary.csv", "a,b\n1,2\n", "a,b\n1,2\n1,2\n")


@pytest.mark.parametrize("kind", KINDS)
def test_the_report_matches_its_golden_copy(tmp_path: Path, kind: str) -> None:
    report = report_of(kind, tmp_path)
    for name in COMPARED:
        golden = (GOLDEN_DIR / kind / name).read_text()
        made = (report / name).read_text()
        diff = "".join(
            difflib.unified_diff(
                golden.splitlines(keepends=True),
                made.splitlines(keepends=True),
                f"golden/{kind}/{name}",
                f"made/{kind}/{name}",
                n=1,
            )
        )
        assert _same(name, golden, made), (
            f"{kind}'s {name} differs from its golden copy (regenerate with "
            f"`python -m tests.analysis.golden_reports` if the change is meant):\n{diff[:4000]}"
        )
