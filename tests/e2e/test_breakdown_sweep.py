"""The breakdown search end to end: a real local sweep (real agents, the virtual meter) searching
the blob workload's body size per mode, its breakdown.csv and its report.

The score is exact (body bytes per request is the size asked for), so the bracket is known:
the search must end between the last size at most 100000 and the first above it. Its bounds,
16384 and 262144, are four halvings apart: two probes inside them bracket 100000 to a factor of
2. No idle baseline after the sweep: no assertion reads it, and the one after this search's
last trial took ten attempts (9 s) to be quiet here."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from analysis.columns import BREAKDOWN
from analysis.trial_columns import header
from tests.conftest import h2iot

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "local.toml"
LIMIT_BYTES = 100_000
LOW_BYTES, HIGH_BYTES = 16_384, 262_144


def test_a_blob_search_brackets_the_size_per_mode_and_reports_it(tmp_path: Path) -> None:
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", 'workload.kind="blob"',
        "--set", "workload.requests=3",
        "--set", 'sweep={mode = ["sequential", "concurrent"]}',
        "--set", 'search.param="size_bytes"',
        "--set", f"search.low={LOW_BYTES}",
        "--set", f"search.high={HIGH_BYTES}",
        "--set", 'search.metric="blob_body_bytes"',
        "--set", 'search.relative_to="blob_request_count"',
        "--set", f"search.threshold={LIMIT_BYTES}",
        "--set", 'search.holds="at_most"',
        "--set", "search.repetitions=2",
        "--set", "search.resolution=2",
        "--set", "search.unit_bytes=1",
        "--set", "run.idle_baseline_s=1",
        "--set", "energy.idle_end=false",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    assert f"breakdown: {run / BREAKDOWN}" in result.stdout
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["axes"] == ["size_bytes", "mode"]
    assert manifest["config"]["search"]["param"] == "size_bytes"
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == header(("size_bytes", "mode"), "blob", search=True)
    assert rows and all(row["status"] == "ok" for row in rows)
    for row in rows:
        # Every probe trial is a whole trial of the workload, with its energy.
        assert int(row["blob_body_bytes"]) == 3 * int(row["size_bytes"])
        assert float(row["energy_mj"]) > 0 and row["search_probe"]

    with (run / BREAKDOWN).open() as handle:
        table = list(csv.DictReader(handle))
    assert [line["mode"] for line in table] == ["sequential", "concurrent"]
    for line in table:
        passing, failing = int(float(line["passing"])), int(float(line["failing"]))
        assert line["status"] == "found" and passing <= LIMIT_BYTES < failing <= 2 * passing
        assert float(line["passing_mean"]) == passing  # the score: bytes per request
        assert float(line["mb_s"]) == round(float(line["breakdown"]) * 3 / 1e6, 9)
        assert int(line["trials"]) == sum(1 for r in rows if r["mode"] == line["mode"])
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert sum(e["event"] == "search_group_done" for e in events) == 2

    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    markdown = (run / "report" / "report.md").read_text()
    assert "## Breakdown search" in markdown
    assert "| mode | breakdown (bracket) |" in markdown
