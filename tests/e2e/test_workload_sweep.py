"""The workload seam end to end: a real local sweep of the test workload `blob` over a numeric
and a categorical axis, its report and the notebook, on the same path as the page workload."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nbformat
import pandas as pd
from nbclient import NotebookClient

from analysis.trial_columns import header
from tests.conftest import h2iot

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "local.toml"
NOTEBOOK = REPO / "analysis" / "notebooks" / "study_figures.ipynb"
SIZES = (1024, 65536)
MODES = ("sequential", "concurrent")


def test_a_blob_sweep_over_a_size_and_a_mode_records_reports_and_draws(
    tmp_path: Path, monkeypatch
) -> None:
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", 'workload.kind="blob"',
        "--set", "workload.requests=3",
        "--set", 'sweep={size_bytes = [1024, 65536], mode = ["sequential", "concurrent"]}',
        "--set", "run.repetitions=2",
        "--set", "run.idle_baseline_s=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["axes"] == ["size_bytes", "mode"]
    assert manifest["workload"]["kind"] == "blob"
    # The declaration's multi-client facts travel with the run.
    assert manifest["workload"]["spread_param"] == "requests"
    assert manifest["workload"]["count_field"] == "request_count"
    assert [c["name"] for c in manifest["workload"]["columns"]] == [
        "blob_request_count",
        "blob_body_bytes",
        "blob_latency_mean_s",
        "blob_latency_max_s",
    ]
    assert (run / "trials.csv").read_text().splitlines()[0].split(",") == header(
        ("size_bytes", "mode"), "blob"
    )
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8 and all(row["status"] == "ok" for row in rows), rows
    points = {(int(row["size_bytes"]), row["mode"]) for row in rows}
    assert points == {(size, mode) for size in SIZES for mode in MODES}
    for row in rows:
        size = int(row["size_bytes"])
        assert row["workload"] == "blob"
        assert int(row["blob_request_count"]) == 3
        assert int(row["blob_body_bytes"]) == 3 * size
        assert 0 < float(row["blob_latency_mean_s"]) <= float(row["blob_latency_max_s"])
        assert int(row["client_bytes_received"]) > 3 * size  # bodies plus frame headers
        assert float(row["server_cpu_s"]) > 0 and float(row["energy_mj"]) > 0

    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    markdown = (run / "report" / "report.md").read_text()
    assert "Not compared: the study measured the page workload" in markdown
    assert "| 1024 | concurrent | 2 |" in markdown  # a row per point, categories as text
    assert "flow-control bound" not in markdown  # the page's window bound is not this run's
    assert (run / "report" / "figures" / "workload_blob.png").exists()
    summary = pd.read_csv(run / "report" / "summary.csv")
    assert list(summary.columns[:3]) == ["metric", "size_bytes", "mode"]
    latency = summary[summary["metric"] == "blob_latency_max_s"]
    assert len(latency) == 4 and (latency["n"] == 2).all()

    monkeypatch.setenv("H2IOT_RUN", str(run))
    monkeypatch.setenv("H2IOT_NOTEBOOK_OUT", str(tmp_path / "figures"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    drawn = {p.stem for p in (tmp_path / "figures").glob("*.png")}
    assert {"figure1_client", "workload_blob"} <= drawn
