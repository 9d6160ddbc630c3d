"""Each workload's report is byte-identical to its golden copy (tests/analysis/golden_reports)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tests.analysis.golden_reports import COMPARED, GOLDEN_DIR, KINDS, report_of


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
        assert made == golden, (
            f"{kind}'s {name} differs from its golden copy (regenerate with "
            f"`python -m tests.analysis.golden_reports` if the change is meant):\n{diff[:4000]}"
        )
