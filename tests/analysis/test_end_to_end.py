"""A real recorded run: `h2iot sweep` (local agents, virtual meter) then `h2iot report`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from controller.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_swept_run_reports_with_every_figure(tmp_path: Path) -> None:
    sweep = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "sweep",
            str(REPO / "configs" / "local.toml"),
            "--out",
            str(tmp_path),
            "--no-dashboard",
            "--set",
            "run.repetitions=2",
            "--set",
            "sweep.initial_window_size=[4096,65535]",
            "--set",
            "run.idle_baseline_s=0.5",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=tmp_path,
    )
    assert sweep.returncode == 0, sweep.stdout[-2000:] + sweep.stderr[-2000:]
    (run,) = (p for p in tmp_path.iterdir() if (p / "manifest.json").exists())
    assert main(["report", str(run)]) == 0
    report = run / "report"
    for stem in ("figure1_client", "figure2_server", "figure3_cpu_pct", "power_traces"):
        assert (report / "figures" / f"{stem}.png").exists()
    markdown = (report / "report.md").read_text()
    assert "| ok rows (results) | 4 |" in markdown
    assert "| client CPU time at 4096 vs 65535 | +42 % |" in markdown
    summary = pd.read_csv(report / "summary.csv")
    model = summary["metric"].str.startswith("frame_model:")  # one row per coefficient, no point
    assert model.any()
    summary = summary[~model]
    assert sorted(summary["initial_window_size"].unique()) == [4096, 65535]
    energy = summary.query("metric == 'energy_mj'")
    assert (energy["n"] == 2).all() and (energy["mean"] > 0).all()
