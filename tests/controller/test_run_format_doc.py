from __future__ import annotations

import re
from pathlib import Path

from agent.workloads import SPECS
from analysis.columns import FORMAT_VERSION
from analysis.trial_columns import (
    BENCH_COLUMNS,
    LEADING_COLUMNS,
    METRIC_COLUMNS,
    PHASE_COLUMNS,
    PROTOCOL_COLUMN,
    QUIC_COLUMNS,
    SEARCH_COLUMNS,
    SETTINGS_COLUMNS,
    Column,
    condition_columns,
    kernel_columns,
    workload_columns,
)

DOC = Path(__file__).resolve().parents[2] / "data" / "README.md"
# From the trials.csv table to the end of the conditions' table: the sections on its columns.
TRIALS_SECTIONS = "### `trials.csv` columns"
ROW = re.compile(r"^\| `(?P<name>[a-z0-9_]+)` \|", re.MULTILINE)


def _declared() -> tuple[Column, ...]:
    own = tuple(column for kind in SPECS for column in workload_columns(kind))
    return (
        *LEADING_COLUMNS, PROTOCOL_COLUMN, *SEARCH_COLUMNS, *BENCH_COLUMNS, *METRIC_COLUMNS,
        *SETTINGS_COLUMNS, *PHASE_COLUMNS, *QUIC_COLUMNS, *own, *condition_columns(),
        *kernel_columns(),
    )  # fmt: skip


def test_every_trials_csv_column_is_documented_with_its_unit() -> None:
    text = DOC.read_text()
    assert f"format version {FORMAT_VERSION}" in text
    for column in _declared():
        assert f"| `{column.name}` | {column.unit} | {column.meaning} |" in text, column.name


def test_every_documented_trials_csv_column_is_declared() -> None:
    text = DOC.read_text()
    documented = ROW.findall(text[text.index(TRIALS_SECTIONS) :])
    assert documented, "no trials.csv column rows found"
    assert sorted(set(documented) - {column.name for column in _declared()}) == []
