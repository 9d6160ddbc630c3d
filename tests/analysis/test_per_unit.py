"""Energy per unit of work (analysis.per_unit): each trial's energy over its own count of units,
then the per-point statistics every metric gets; the stream and api reports draw it."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.columns import METRICS
from analysis.load import Run
from analysis.per_unit import PerUnitEnergy
from analysis.workloads.api import PER_REQUEST
from analysis.workloads.payload import PER_MESSAGE
from analysis.workloads.stream import PER_ITEM


def _run(workload: str, rows: list[dict[str, object]]) -> Run:
    """A run of these ok rows, every study metric present (a real trials.csv has them all)."""
    manifest = {"workload": {"kind": workload}, "config": {"run": {"confidence": 0.9}}}
    full = [{**{m.name: 1.0 for m in METRICS}, **row} for row in rows]
    return Run(
        Path("/nowhere/run"), manifest, ("payload_doubles",), pd.DataFrame(full), len(rows),
        pd.DataFrame(),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("workload", "per_unit"),
    [("stream", PER_ITEM), ("api", PER_REQUEST), ("payload", PER_MESSAGE)],
)
def test_each_trial_is_divided_by_its_own_count(workload: str, per_unit: PerUnitEnergy) -> None:
    # The mean of the ratios, not the ratio of the means: 100/10 and 300/10 -> 20; 0 units: none.
    rows = [
        {"payload_doubles": 8, per_unit.count: 10, "energy_mj": 100.0, "energy_above_idle_mj": 40},
        {"payload_doubles": 8, per_unit.count: 10, "energy_mj": 300.0, "energy_above_idle_mj": 60},
        {"payload_doubles": 8, per_unit.count: 0, "energy_mj": 500.0, "energy_above_idle_mj": 9},
        {"payload_doubles": 64, per_unit.count: 4, "energy_mj": 8.0, "energy_above_idle_mj": 2.0},
    ]
    total, above = per_unit.derived
    summary = per_unit.rows(_run(workload, rows)).set_index(["metric", "payload_doubles"])
    assert summary.loc[(total, 8), "n"] == 2 and summary.loc[(total, 8), "mean"] == 200 / 10
    assert summary.loc[(above, 8), "mean"] == 5.0
    assert summary.loc[(total, 64), "mean"] == 2.0 and summary.loc[(above, 64), "n"] == 1
    table = per_unit.table(_run(workload, rows))
    assert math.isnan(table[total].iloc[2])


def test_a_run_without_the_count_has_no_rows() -> None:
    rows = [{"payload_doubles": 8, "energy_mj": 1.0, "energy_above_idle_mj": 0.5}]
    assert PER_ITEM.rows(_run("stream", rows)).empty
