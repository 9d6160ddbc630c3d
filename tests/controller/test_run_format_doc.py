from __future__ import annotations

from pathlib import Path

from agent.workloads import SPECS
from analysis.columns import FORMAT_VERSION
from controller.run.columns import (
    LEADING_COLUMNS,
    METRIC_COLUMNS,
    QUIC_COLUMNS,
    SEARCH_COLUMNS,
    condition_columns,
    workload_columns,
)

DOC = Path(__file__).resolve().parents[2] / "data" / "README.md"


def test_every_trials_csv_column_is_documented_with_its_unit() -> None:
    text = DOC.read_text()
    assert f"format version {FORMAT_VERSION}" in text
    own = tuple(column for kind in SPECS for column in workload_columns(kind))
    for column in (
        LEADING_COLUMNS + SEARCH_COLUMNS + METRIC_COLUMNS + QUIC_COLUMNS + own + condition_columns()
    ):
        assert f"| `{column.name}` | {column.unit} | {column.meaning} |" in text, column.name
