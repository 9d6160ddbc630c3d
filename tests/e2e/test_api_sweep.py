"""configs/api.toml end to end, shrunk: a real local sweep over both server stacks and both
data layers (the database built on the server node, hypercorn started by the agent for its
trials), every trial's figures in trials.csv, and the report's reference-shaped table."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.conftest import h2iot

pytest.importorskip("hypercorn", reason="the api extra (hypercorn, starlette) is not installed")

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "api.toml"


def test_the_api_sweep_runs_both_stacks_and_layers_and_reports_the_table(tmp_path: Path) -> None:
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", "sweep.users=[3]",
        "--set", "workload.loops=2",
        "--set", "workload.records=20",
        "--set", "run.repetitions=1",
        "--set", "run.idle_baseline_s=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(row["server_engine"], row["data_layer"]) for row in rows} == {
        ("builtin", "sql"),
        ("builtin", "orm"),
        ("hypercorn", "sql"),
        ("hypercorn", "orm"),
    }
    for row in rows:
        assert row["status"] == "ok", row["error"]
        assert int(row["api_requests"]) == 3 * 2 * 7 and int(row["api_errors"]) == 0
        assert float(row["api_throughput_rps"]) > 0
        assert float(row["server_cpu_peak_pct"]) > 0
        assert int(row["server_rss_peak_bytes"]) > 0
    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    text = (run / "report" / "report.md").read_text()
    table = text.split("## The reference's table", 1)[1]
    assert "| users | agent (h2), plain SQL | agent (h2), ORM (SQLAlchemy) |" in table
    assert "\n| 3 | " in table
    assert (run / "report" / "figures" / "api_energy.png").exists()
    assert "api_energy_above_idle_per_request_mj" in (run / "report" / "summary.csv").read_text()
