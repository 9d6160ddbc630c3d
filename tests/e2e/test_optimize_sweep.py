"""The optimizing search with real local agents and the virtual meter: configs/optimize.toml and
its grid (configs/optimize-grid.toml) over a smaller space, and `h2iot report SEARCH GRID`
checking what the search found against the grid's best."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from analysis.columns import OPTIMIZE
from tests.conftest import h2iot

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = (
    "--no-dashboard",
    "--set", 'sweep={initial_window_size = [4095, 65535], max_frame_size = [16384], '
    'window_update_policy = ["half", "every-frame"]}',
    "--set", "workload.total_bytes=300000",
    "--set", "run.idle_baseline_s=1",
    "--set", "energy.idle_end=false",
)  # fmt: skip


def _run(out: Path) -> Path:
    (run,) = out.iterdir()
    return run


def test_the_search_finds_a_point_and_its_report_checks_it_against_the_grid(
    tmp_path: Path,
) -> None:
    grid = h2iot(
        "sweep", str(CONFIGS / "optimize-grid.toml"), "--out", str(tmp_path / "grid"), *SMALL,
        "--set", "run.repetitions=2",
    )  # fmt: skip
    assert grid.returncode == 0, grid.stdout + grid.stderr
    search = h2iot(
        "sweep", str(CONFIGS / "optimize.toml"), "--out", str(tmp_path / "search"), *SMALL,
        "--set", "search.budget=6", "--set", "search.repetitions=2",
        "--set", "search.max_repetitions=4",
    )  # fmt: skip
    assert search.returncode == 0, search.stdout + search.stderr
    assert "search done (" in search.stdout
    run = _run(tmp_path / "search")
    with (run / OPTIMIZE).open() as handle:
        trace = list(csv.DictReader(handle))
    with (run / "trials.csv").open() as handle:
        rows = [row for row in csv.DictReader(handle) if row["status"] == "ok"]
    assert 2 <= len(rows) <= 6 and int(trace[-1]["trials_used"]) == len(rows)
    assert {row["search_group"] for row in rows} == {"1"}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["search"]["kind"] == "optimize"

    report = h2iot("report", str(run), str(_run(tmp_path / "grid")))
    assert report.returncode == 0, report.stdout + report.stderr
    text = (run / "report" / "report.md").read_text()
    assert "## Optimizing search" in text
    assert (
        "over the grid of 4 points" in text
        and "against 20 for the full grid at run.repetitions = 5" in text
    )
    assert "### Against the full grid" in text
    assert any(
        verdict in text
        for verdict in ("found the grid's best point", "cannot tell from", "missed the grid's best")
    )
    assert (run / "report" / "figures" / "search.png").exists()
    # The figure leads the report, the search's section its findings.
    assert text.index("figures/search.png") < text.index("## Optimizing search")
