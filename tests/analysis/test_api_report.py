"""The api workload's reference-shaped table: one row per user count, one column per stack and
data layer, each figure a mean ± its CI half-width over the cell's trials."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.document import Table
from analysis.findings import sections_of
from analysis.load import Run
from analysis.stats import summarize
from analysis.workloads.api import api_blocks, cell, reference_table


def _run(
    rows: list[dict[str, object]],
    workload: str = "api",
    axes=("users", "server_engine", "data_layer"),
) -> Run:
    manifest = {"workload": {"kind": workload}, "config": {"run": {"confidence": 0.9}}}
    return Run(
        Path("/nowhere/run"), manifest, tuple(axes), pd.DataFrame(rows), len(rows), pd.DataFrame()
    )


def _trial(users: int, stack: str, layer: str, rps: float) -> dict[str, object]:
    return {
        "users": users,
        "server_engine": stack,
        "data_layer": layer,
        "api_throughput_rps": rps,
        "api_latency_sd_s": 0.010,
        "api_requests": 100.0,
        "server_cpu_peak_pct": "80.0",  # as text: the loader does not know the column
        "server_rss_peak_bytes": 50e6,
        "energy_above_idle_mj": 200.0,
    }


def test_one_row_per_user_count_one_column_per_stack_and_layer() -> None:
    rows = [
        _trial(users, stack, layer, rps)
        for users in (16, 64)
        for stack in ("hypercorn", "h2")
        for layer in ("orm", "sql")
        for rps in (100.0, 110.0, 120.0)
    ]
    table = reference_table(_run(rows))
    assert table.header == (
        "users",
        "agent (h2), plain SQL",
        "agent (h2), ORM (SQLAlchemy)",
        "hypercorn + Starlette, plain SQL",
        "hypercorn + Starlette, ORM (SQLAlchemy)",
    )
    assert [row[0] for row in table.rows] == ["16", "64"]
    expected = cell(summarize([100.0, 110.0, 120.0], 0.9), "{} req/s")
    first = table.rows[0][1]
    assert first.startswith(expected + ", sd 10 ± 0 ms, 80 ± 0 % CPU, 50 ± 0 MB, 2 ± 0 mJ/req")
    assert first.endswith("(n 3)")


def test_a_run_without_the_axes_takes_them_from_its_config() -> None:
    rows = [{"users": 16, "api_throughput_rps": 50.0, "api_latency_sd_s": 0.02}]
    run = _run(rows, axes=("users",))
    run.manifest["config"].update(  # type: ignore[attr-defined]
        {"nodes": {"server": {"engine": "hypercorn"}}, "workload": {"data_layer": "orm"}}
    )
    table = reference_table(run)
    assert table.header == ("users", "hypercorn + Starlette, ORM (SQLAlchemy)")
    assert table.rows == (("16", "50 req/s, sd 20 ms (n 1)"),)


@pytest.mark.parametrize("workload", ["page", "blob"])
def test_other_workloads_get_no_section(workload: str) -> None:
    sections = sections_of(_run([_trial(16, "h2", "sql", 1.0)], workload))
    assert api_blocks not in sections.values()
    assert list(sections) == ["breakdown", "search", "study"]
    assert list(sections_of(_run([_trial(16, "h2", "sql", 1.0)]))) == [
        "breakdown",
        "search",
        "study",
        "api",
    ]


def test_a_run_without_ok_trials_gets_no_section() -> None:
    assert api_blocks(_run([])) == []


def test_the_section_ends_with_the_table() -> None:
    blocks = api_blocks(_run([_trial(16, "h2", "sql", 1.0)]))
    assert isinstance(blocks[-1], Table)
