"""A meter source of one's own (issue 35): the toy of this folder, found through the
`h2iot.meter_sources` entry point with no file of the project touched, runs a real short local
sweep; each trial's energy is its constant power times the window, and that window is the one
its marker edges cut."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
POWER_MW = 1500.0  # h2iot_toy_meter.tap's
EDGES_FILE = "toy-edges.txt"


def test_the_toy_source_sweeps_with_its_power_over_its_marker_window(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run(
        [
            sys.executable, "-m", "controller.cli", "sweep", "configs/local.toml",
            "--no-dashboard", "--out", str(tmp_path),
            "--set", 'meter.source="toy"', "--set", "workload.total_bytes=200000",
            "--set", "sweep.initial_window_size=[4096, 65535]", "--set", "run.repetitions=2",
            "--set", "run.idle_baseline_s=0.5",
        ],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = tmp_path.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["meter"]["source"] == "toy"
    assert manifest["idle_baseline_mw"] == POWER_MW
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), rows
    cut = [tuple(map(float, line.split())) for line in (run / EDGES_FILE).read_text().splitlines()]
    assert len(cut) == len(rows)
    for row, (rising_s, falling_s) in zip(rows, cut, strict=True):
        assert row["window_source"] == "marker"
        assert float(row["window_start_s"]) == pytest.approx(rising_s, abs=1e-6)
        window_s = float(row["window_s"])
        assert window_s == pytest.approx(falling_s - rising_s, abs=1e-6)
        assert float(row["energy_mj"]) == pytest.approx(POWER_MW * window_s, rel=1e-6, abs=1e-5)
        assert float(row["energy_above_idle_mj"]) == pytest.approx(0.0, abs=1e-5)
    tracked = subprocess.run(
        ["git", "grep", "-l", "h2iot_toy_meter", "--", ":!tests/meter/toy_source"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert tracked.stdout == ""
