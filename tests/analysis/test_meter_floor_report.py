"""The meter's floor in a report (issue 38): the same two points, whose true difference in energy
above idle is a fraction of one ACS712 step over their windows, recorded once as an ACS712 run
and once as a PPK2 run (the records the board's and the PPK2's taps write). The ACS712 report
says the comparison is below the meter's floor, in its findings and on its first screen; the PPK2
report resolves it. Fake runs (tests/analysis/fake_run.py), not a sweep: the modelled difference
is exact and nothing depends on the machine's load."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.compare import compare_summaries, write_comparison
from analysis.load import load_run
from analysis.points import ENERGY_METRICS, metric_rows, summarize_points
from analysis.report import write_report
from controller.meter.calibration import nominal
from controller.meter.ppk2.device import EXAMPLE_METADATA
from controller.meter_sources.board.resolution import acs712
from controller.meter_sources.ppk2.resolution import ppk2_resolution
from tests.analysis.fake_run import Model, record_run

# Energy above idle 120 + 200000 / window mJ: 48.8 mJ at 4096 against 3.05 at 65535, 1 % noise.
# The runs tell the 46 mJ apart in 5 repetitions; one ACS712 step (132 mW) over a window of
# 0.5 to 2.5 s is 66 to 330 mJ.
MODEL = Model(energy_per_window_mj_b=200_000.0, noise=0.01)
WINDOWS = (4096, 65535)
RECORDS = {
    "acs712": acs712(nominal(), 0, 1000, 104.0).to_dict(),
    "ppk2": ppk2_resolution(EXAMPLE_METADATA, 5.0).to_dict(),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("floor")
    made = {}
    for meter, record in RECORDS.items():
        path = record_run(
            root / meter, windows=WINDOWS, model=MODEL, meter_resolution=record, name=meter
        )
        made[meter] = path
        write_report(load_run(path))
    return made


def _first_screen(run: Path) -> str:
    text = (run / "report" / "report.md").read_text(encoding="utf-8")
    return text.split("## Against the study's findings")[0]


def test_each_energy_point_states_its_floor_in_summary_csv(reports: dict[str, Path]) -> None:
    for meter, run in reports.items():
        summary = pd.read_csv(run / "report" / "summary.csv")
        energy = summary[summary["metric"].isin(ENERGY_METRICS)]
        assert energy["meter_floor_mj"].notna().all(), meter
        assert (energy["meter_floor_mj"] >= energy["meter_step_mj"]).all()
        others = summary[summary["metric"] == "client_response_s"]
        assert others["meter_floor_mj"].isna().all()  # no meter bounds a time
    acs = pd.read_csv(reports["acs712"] / "report" / "summary.csv")
    floors = metric_rows(acs, "energy_above_idle_mj")["meter_step_mj"]
    assert floors.min() > 60  # one 132 mW step over at least half a second


def test_below_one_acs712_step_is_the_meters_floor_and_a_ppk2_resolves_it(
    reports: dict[str, Path],
) -> None:
    acs = _first_screen(reports["acs712"])
    assert (
        "1 of 1 energy_above_idle_mj differences between neighbouring points are below the "
        "meter's floor" in acs
    )
    assert (
        "The finding 'client energy above idle settles from 4096 up' rests on a difference "
        "between 4096 and 65535 below the meter's floor" in acs
    )
    ppk2 = _first_screen(reports["ppk2"])
    assert "meter's floor" not in ppk2
    for meter, expected in (("acs712", "below the meter's floor"), ("ppk2", "resolved")):
        report = (reports[meter] / "report" / "report.md").read_text(encoding="utf-8")
        section = report.split("*energy_above_idle_mj: each difference between neighbouring")[1]
        assert expected in section.split("\n\n")[1], meter


def test_a_comparison_of_two_runs_takes_the_coarser_meters_floor(
    reports: dict[str, Path],
) -> None:
    runs = {m: load_run(reports[m]) for m in ("acs712", "ppk2")}
    acs, ppk2 = (summarize_points(runs[m]) for m in ("acs712", "ppk2"))
    table = compare_summaries(ppk2, acs, ("initial_window_size",), 0.9)
    rows = table[table["metric"] == "energy_above_idle_mj"]
    assert (rows["meter_floor_mj"] > 60).all()
    # The runs model the same energy: what differs is noise, far inside the ACS712's floor.
    assert set(rows["resolvability"]) == {"below_meter_floor"}
    assert all(math.isfinite(v) for v in rows["min_detectable"])
    written = write_comparison(runs["ppk2"], ppk2, runs["acs712"], acs)
    text = written.markdown.read_text(encoding="utf-8")
    assert "Read with care: 4 differences (energy_mj, energy_above_idle_mj) are below" in text
    assert "| differs | resolvable |" in text
