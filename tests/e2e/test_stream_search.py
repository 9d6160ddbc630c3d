"""The breakdown search on the stream workload: configs/stream*.toml load, and a real local
search of one transport and rate (real agents, the virtual meter) reports its table and figure,
and the notebook draws the figure too."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from analysis.columns import BREAKDOWN
from controller.config import load_config
from controller.sweep.search_run import first_point
from tests.conftest import h2iot

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
NOTEBOOK = REPO / "analysis" / "notebooks" / "study_figures.ipynb"


def test_the_stream_configs_load_as_documented() -> None:
    sweep = load_config(CONFIGS / "stream.toml")
    assert sweep.workload.kind == "stream" and sweep.search is None
    assert dict(sweep.sweep.axes)["transport"] == ("sse", "websocket", "grpc", "poll")
    search = load_config(CONFIGS / "stream-breakdown.toml")
    assert search.search is not None and search.search.param == "payload_doubles"
    assert search.sweep.names == ("transport", "rate_hz")
    assert first_point(search).axes == (
        ("payload_doubles", 100),
        ("transport", "grpc"),
        ("rate_hz", 25.0),
    )


def test_a_stream_search_writes_its_table_figure_and_notebook(tmp_path: Path, monkeypatch) -> None:
    result = h2iot(
        "sweep", str(CONFIGS / "stream-breakdown.toml"), "--no-dashboard",
        "--out", str(tmp_path / "runs"),
        "--set", 'sweep={transport = ["sse"], rate_hz = [25.0]}',
        "--set", "search.high=200000",
        "--set", "search.repetitions=2",
        "--set", "search.max_repetitions=2",
        "--set", "search.resolution=4",
        "--set", "workload.duration_s=0.5",
        "--set", "run.trial_timeout_s=20",
        "--set", "run.idle_baseline_s=1",
        "--set", "energy.idle_end=false",
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    with (run / BREAKDOWN).open() as handle:
        (line,) = list(csv.DictReader(handle))
    assert (line["transport"], line["rate_hz"]) == ("sse", "25.0")
    assert line["status"] in ("found", "below_low", "above_high"), line
    if line["status"] == "found":
        assert float(line["passing"]) < float(line["breakdown"]) < float(line["failing"])
        assert float(line["mb_s"]) > 0
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert all(row["workload"] == "stream" and row["search_probe"] for row in rows)

    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    markdown = (run / "report" / "report.md").read_text()
    assert "| transport | rate_hz = 25.0 |" in markdown
    assert (run / "report" / "figures" / "stream_received_rate.png").exists()
    assert (run / "report" / "figures" / "stream_energy.png").exists()
    with (run / "report" / "summary.csv").open() as handle:
        per_item = [r for r in csv.DictReader(handle) if r["metric"] == "stream_energy_per_item_mj"]
    assert per_item and all(float(r["mean"]) > 0 for r in per_item if int(r["n"]) > 0)

    monkeypatch.setenv("H2IOT_RUN", str(run))
    monkeypatch.setenv("H2IOT_NOTEBOOK_OUT", str(tmp_path / "figures"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=180, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()  # fmt: skip
    assert (tmp_path / "figures" / "stream_received_rate.png").exists()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["axes"] == ["payload_doubles", "transport", "rate_hz"]
