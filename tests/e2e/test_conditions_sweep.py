"""A real local sweep records each node's conditions per trial: trials.csv columns (a value,
or empty with the node's reason), the manifest's summary, the report's section; and each node's
kernel work over the trial (softirqs, context switches, UDP and TCP counts)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from analysis.trial_columns import CONDITION_FIELDS, KERNEL_FIELDS
from tests.conftest import h2iot, require_tool

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local.toml"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["h2", "nghttp2"])
def test_a_sweep_records_the_nodes_conditions(tmp_path: Path, engine: str) -> None:
    engines: list[str] = []
    if engine == "nghttp2":  # nghttpd's supervisor reads them for the server
        require_tool("nghttp", "nghttpd")
        engines = ["--set", "nodes.client.engine=nghttp2", "--set", "nodes.server.engine=nghttp2"]
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path),
        "--set", "workload.total_bytes=300000", "--set", "run.idle_baseline_s=1",
        "--set", "sweep.initial_window_size=[1024, 65535]", "--set", "run.repetitions=1",
        *engines,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    with (run / "trials.csv").open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["status"] == "ok"]
    assert len(rows) == 2
    for row in rows:
        for role in ("client", "server"):
            missing = row[f"{role}_conditions_missing"]
            for field in (f.name for f in CONDITION_FIELDS if f.name != "conditions_missing"):
                cell = row[f"{role}_{field}"]
                assert bool(cell) != (f"{field}: " in missing), (role, field, row)
            assert float(row[f"{role}_other_cpu_pct"]) >= 0.0
            kernel = {field.name: int(row[f"{role}_{field.name}"]) for field in KERNEL_FIELDS}
            # The fetch's segments, on a shared loopback both nodes count them all; the
            # process (or nghttp, nghttpd) waited on its socket at least once.
            assert kernel["tcp_segments_in"] > 0 and kernel["tcp_segments_out"] > 0, row
            assert kernel["voluntary_ctx_switches"] > 0, (role, row)
            assert min(kernel.values()) >= 0
    summary = json.loads((run / "manifest.json").read_text())["conditions"]
    for role in ("client", "server"):
        assert summary[role]["trials"] == 2
        assert summary[role]["trials_with_conditions"] == 2
    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    text = (run / "report" / "report.md").read_text()
    assert "## Node conditions" in text
    assert "| client | 2 of 2 |" in text
