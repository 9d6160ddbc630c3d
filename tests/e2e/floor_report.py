"""What every meter's report must state of its floor (issue 38): per energy point the meter's
floor over its median trial (summary.csv), and per difference between neighbouring points
whether it is resolvable (report.md's "Meter floor" section)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

ENERGY_METRICS = ("energy_mj", "energy_above_idle_mj")
VERDICTS = ("resolved (", "below this run's detectable", "below the meter's floor", "not known")


def assert_floor_reported(report_dir: Path) -> None:
    with (report_dir / "summary.csv").open() as handle:
        energy = [row for row in csv.DictReader(handle) if row["metric"] in ENERGY_METRICS]
    assert energy, "summary.csv has no energy rows"
    floors = [float(row["meter_floor_mj"]) for row in energy]
    assert all(math.isfinite(floor) and floor > 0 for floor in floors), floors
    section = (report_dir / "report.md").read_text().split("## Meter floor", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "The meter's floor over each point's median trial" in section
    points = len({tuple(row.values())[1:] for row in energy if row["metric"] == "energy_mj"})
    if points > 1:
        assert any(verdict in section for verdict in VERDICTS), section
