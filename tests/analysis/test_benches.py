"""`h2iot report A B` on two benches of one shared study (analysis/benches.py): one fake run's
trials split between two bench runs as a shared sweep would leave them, one trial in both (its
row written just before its bench died, run again on the other bench, which started it first)."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.benches import BENCH_METRICS, shared_study
from analysis.errors import RunFormatError
from analysis.load import load_run
from analysis.stats import summarize, welch_difference
from controller.cli import main
from tests.analysis.fake_run import record_run

START_NS = 1_796_000_000_000_000_000
AGAIN = "t0006"  # the trial both benches ran
IDLE_MW = {"a": 1210.0, "b": 1190.0, "c": 1200.0, "-": 1200.0}


def _bench(
    source: Path,
    folder: Path,
    bench: str,
    keep: Callable[[int, dict[str, str]], bool],
    study: dict[str, Any] | None,
    started: dict[str, int] | None = None,
) -> Path:
    """A copy of `source` holding the rows `keep` takes, its manifest naming `study` (with
    `bench`); `started` overrides rows' t_wall_start_ns."""
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("report"))
    manifest = json.loads((folder / "manifest.json").read_text())
    if study is not None:
        manifest["study"] = {**study, "bench": bench}
    # Each bench measures its own idle baseline.
    manifest["idle_baseline_mw"] = IDLE_MW[bench]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with (source / "trials.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    assert header is not None
    with (folder / "trials.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, header, lineterminator="\n")
        writer.writeheader()
        for index, row in enumerate(rows):
            if keep(index, row):
                start = (started or {}).get(row["trial_id"], START_NS + index * 10**9)
                writer.writerow(row | {"t_wall_start_ns": str(start)})
    return folder


STUDY = {"name": "fake-study", "storage": "sqlite:///study.db", "heartbeat_s": 1, "grace_s": 3}


def _split(root: Path, **studies: Any) -> tuple[Path, Path]:
    """Bench a takes the first three blocks (every point thrice, the failed attempt), b the
    other three and AGAIN (block 3) too, which b started first."""
    source = root / "source"
    record_run(source, windows=(4096, 65535), repetitions=6, power=False)
    a = _bench(
        source,
        root / "bench-a",
        "a",
        lambda _i, row: int(row["block"]) <= 3,
        studies.get("a", STUDY),
    )
    b = _bench(
        source,
        root / "bench-b",
        "b",
        lambda _i, row: int(row["block"]) > 3 or row["trial_id"] == AGAIN,
        studies.get("b", STUDY),
        started={AGAIN: START_NS - 1},
    )
    return a, b


def _edit(run: Path, trial_id: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    """Rewrites the run's ok row of `trial_id` as `change` returns it."""
    with (run / "trials.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    assert header is not None
    with (run / "trials.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, header, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(change(row) if row["trial_id"] == trial_id else row)


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    a, b = _split(tmp_path_factory.mktemp("benches"))
    assert main(["report", str(a), str(b)]) == 0
    return a, b


def _ok(run: Path) -> pd.DataFrame:
    trials = pd.read_csv(run / "trials.csv")
    return trials[trials["status"] == "ok"]


def test_the_study_report_merges_the_benches_and_links_their_reports(
    reported: tuple[Path, Path],
) -> None:
    a, b = reported
    study = a / "report" / "study-fake-study"
    for name in ("report.md", "report.html", "summary.csv", "bench_effects.csv"):
        assert (study / name).is_file(), name
    assert (study / "figures" / "benches.png").is_file()
    assert not list((a / "report").glob("compare-*"))
    markdown = (study / "report.md").read_text()
    assert markdown.startswith("# Study report: fake-study\n")
    assert "shared by 2 benches (a, b)" in markdown
    # Each bench's own report as before, linking the study's.
    for run in (a, b):
        assert "study fake-study, all benches" in (run / "report" / "report.md").read_text()
    assert "[report of bench b" in markdown


def test_pooled_n_per_point_counts_every_bench_s_trials_once(reported: tuple[Path, Path]) -> None:
    a, b = reported
    summary = pd.read_csv(a / "report" / "study-fake-study" / "summary.csv")
    both = pd.concat([_ok(a), _ok(b)])
    for metric in ("energy_mj", "client_response_s"):
        rows = summary[summary["metric"] == metric].set_index("initial_window_size")
        per_point = both.groupby("initial_window_size")["trial_id"]
        assert rows["n"].to_dict() == per_point.nunique().to_dict()
        assert rows["n"].sum() == len(both) - 1  # AGAIN once
    # Per bench: the trials kept, the rows left out (AGAIN, which b started first), the failed
    # attempts.
    markdown = (a / "report" / "study-fake-study" / "report.md").read_text()
    assert f"| a | {a} | {len(_ok(a)) - 1} | 1 | 1 | 1210.0 |" in markdown
    assert f"| b | {b} | {len(_ok(b))} | 0 | 0 | 1190.0 |" in markdown


def test_the_bench_effect_table_has_each_bench_and_a_ci_per_point(
    reported: tuple[Path, Path],
) -> None:
    a, b = reported
    effects = pd.read_csv(a / "report" / "study-fake-study" / "bench_effects.csv")
    assert set(effects["metric"]) == set(BENCH_METRICS)
    for (metric, window), rows in effects.groupby(["metric", "initial_window_size"]):
        assert list(rows["bench"]) == ["a", "b"], (metric, window)
        assert rows[["ci_low", "ci_high", "effect_ci_low", "effect_ci_high"]].notna().all(axis=None)
        # Two benches: each one's effect is the other's negated, the Welch difference b - a.
        assert rows["effect"].iloc[0] == pytest.approx(-rows["effect"].iloc[1])
    merged = pd.concat([_ok(a).assign(bench="a"), _ok(b).assign(bench="b")])
    merged = merged[~((merged["bench"] == "a") & (merged["trial_id"] == AGAIN))]
    at = merged[merged["initial_window_size"] == 4096]
    values = [at.loc[at["bench"] == bench, "energy_mj"] for bench in ("a", "b")]
    difference = welch_difference(summarize(values[0], 0.9), summarize(values[1], 0.9), 0.9)
    row = effects[(effects["metric"] == "energy_mj") & (effects["initial_window_size"] == 4096)]
    b_row = row[row["bench"] == "b"].iloc[0]
    assert b_row["effect"] == pytest.approx(difference.estimate)
    assert b_row["effect_ci_low"] == pytest.approx(difference.ci_low)
    markdown = (a / "report" / "study-fake-study" / "report.md").read_text()
    assert "| initial_window_size | bench | n | mean [CI] (mJ) | bench - others [CI] (mJ) |" in (
        markdown
    )
    # Each effect against what the trials and the benches' meters (ACS712s) could see.
    energy = effects["metric"].isin(["energy_mj", "energy_above_idle_mj"])
    assert (effects.loc[energy, "meter_floor_mj"] > 0).all()
    assert effects.loc[~energy, "meter_floor_mj"].isna().all()
    assert set(effects["resolvability"]) <= {"resolved", "needs_repetitions", "below_meter_floor"}
    above_idle = effects[effects["metric"] == "energy_above_idle_mj"]
    assert set(above_idle["resolvability"]) == {"below_meter_floor"}  # the same model, 2 benches


def test_a_trial_in_both_benches_is_kept_once_the_first_started(
    reported: tuple[Path, Path],
) -> None:
    a, _b = reported
    study = a / "report" / "study-fake-study"
    trials = pd.read_csv(study / "trial_benches.csv")
    again = trials[trials["trial_id"] == AGAIN]
    assert list(again["bench"]) == ["b", "a"]  # b's row started first
    assert list(again["kept"]) == [True, False]
    assert trials["kept"].sum() == trials["trial_id"].nunique()
    markdown = (study / "report.md").read_text()
    assert f"- {AGAIN} (initial_window_size = " in markdown
    assert "kept bench b's row, left out bench a's" in markdown


def test_runs_of_other_studies_or_of_their_own_are_compared_as_before(tmp_path: Path) -> None:
    """Not one study: write_reports takes the comparison's path (tests/analysis/test_compare*)."""
    a, b = _split(tmp_path, b={**STUDY, "name": "another-study"})
    assert shared_study([load_run(a), load_run(b)]) is None
    c = _bench(tmp_path / "source", tmp_path / "own", "-", lambda _i, _row: True, None)
    assert shared_study([load_run(a), load_run(c)]) is None


def test_a_bench_that_took_no_trial_has_no_report_of_its_own(tmp_path: Path) -> None:
    a, _b = _split(tmp_path)
    idle = _bench(tmp_path / "source", tmp_path / "bench-c", "c", lambda _i, _row: False, STUDY)
    assert main(["report", str(a), str(idle)]) == 0
    assert not (idle / "report").exists()
    markdown = (a / "report" / "study-fake-study" / "report.md").read_text()
    assert f"| c | {idle} | 0 | 0 | 0 | 1200.0 |" in markdown
    assert "No point was measured on two benches" in markdown


def test_the_same_study_planning_other_trials_is_another_study(tmp_path: Path) -> None:
    a, b = _split(tmp_path)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["config"]["run"]["seed"] = 2
    (b / "manifest.json").write_text(json.dumps(manifest))
    assert shared_study([load_run(a), load_run(b)]) is None


def test_a_trial_at_another_point_on_another_bench_names_its_file(tmp_path: Path) -> None:
    a, b = _split(tmp_path)
    _edit(b, AGAIN, lambda row: row | {"initial_window_size": "1024"})
    with pytest.raises(RunFormatError) as caught:
        shared_study([load_run(a), load_run(b)])
    # a's row, started later, is the one read against b's.
    assert str(caught.value).startswith(f"{a / 'trials.csv'}: trial {AGAIN} ran at ")
    assert str(caught.value).endswith(f"in {b / 'trials.csv'}: not one study's plan")


def test_a_row_naming_another_bench_than_its_manifest_is_refused(tmp_path: Path) -> None:
    a, b = _split(tmp_path)
    with (b / "trials.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    with (b / "trials.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, [*rows[0], "bench"], lineterminator="\n")
        writer.writeheader()
        for row in rows:  # as its recorder writes them, but one row names the other bench
            writer.writerow(row | {"bench": "a" if row["trial_id"] == AGAIN else "b"})
    with pytest.raises(RunFormatError) as caught:
        shared_study([load_run(a), load_run(b)])
    assert str(caught.value) == (
        f"{b / 'trials.csv'}: column bench: 'a' where the manifest's study.bench is 'b'"
    )


@pytest.mark.parametrize(
    ("study", "fault"),
    [("not a study", "study: expected an object"), ({"name": "x"}, "study.bench: expected")],
)
def test_a_malformed_study_names_the_manifest(tmp_path: Path, study: Any, fault: str) -> None:
    a, b = _split(tmp_path)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["study"] = study
    (b / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunFormatError, match=f"^{b / 'manifest.json'}: {fault}"):
        shared_study([load_run(a), load_run(b)])


def test_two_runs_of_one_bench_are_refused(tmp_path: Path) -> None:
    a, b = _split(tmp_path)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["study"]["bench"] = "a"
    (b / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunFormatError, match=f"^{b / 'manifest.json'}: study.bench: 'a' is also"):
        shared_study([load_run(a), load_run(b)])
