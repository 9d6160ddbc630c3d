from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from analysis.columns import METRICS
from analysis.facts import EMULATION_CAVEAT, delayed_caveat
from analysis.load import load_run
from analysis.report import write_report
from controller.cli import main
from tests.analysis.fake_run import record_run
from tests.analysis.report_text import assert_results_first

FIGURES = (
    "figure1_client",
    "figure2_server",
    "figure3_cpu_pct",
    "power_traces",
    "frames_per_byte",
    "memory",
    "frame_model",
)
SUMMARY_HEAD = [
    "metric",
    "initial_window_size",
    "n",
    "mean",
    "sd",
    "ci_low",
    "ci_high",
    "confidence",
]


def test_the_report_holds_every_figure_and_table(reported: tuple[Path, Path]) -> None:
    study, _slow = reported
    report = study / "report"
    markdown = (report / "report.md").read_text()
    html = (report / "report.html").read_text()
    for stem in FIGURES:
        png, svg = report / "figures" / f"{stem}.png", report / "figures" / f"{stem}.svg"
        with Image.open(png) as image:
            assert image.format == "PNG" and image.width > 600 and image.height > 300
        assert "<svg" in svg.read_text()[:2000]
        assert f"(figures/{stem}.png)" in markdown and f"(figures/{stem}.svg)" in markdown
        assert f'href="figures/{stem}.svg"' in html
    assert html.count('src="data:image/png;base64,') == len(FIGURES)
    assert not re.search(r'src="(?!data:)', html)  # self-contained: no external images
    for metric in METRICS:
        assert f"({metric.name}, {metric.unit})" in markdown
    for heading in ("The run", "Trials", "Against the study's findings", "Sample size", "Tables"):
        assert f"## {heading}" in markdown
    assert "| client CPU time at 4096 vs 65535 | +42 % |" in markdown
    assert "| client response time at 4096 vs 65535 | +300 % |" in markdown
    assert "| failed attempts | 1 |" in markdown
    assert "## Per-frame cost model" in markdown and "| per WINDOW_UPDATE frame |" in markdown
    summary = pd.read_csv(report / "summary.csv")
    coefficients = summary[summary["metric"].str.startswith("frame_model:")]
    assert "frame_model:cpu_us:client_window_update_frames" in set(coefficients["metric"])
    assert (coefficients["ci_low"] <= coefficients["mean"]).all()
    assert (report / "frame_model_residuals.csv").exists()
    assert "- client (h2): this machine's own core, unthrottled" in markdown
    assert "emulated" not in markdown
    assert markdown.count("\n| --- |") == html.count("<table>")
    assert_results_first(markdown, "figure1_client")
    slow = (_slow / "report" / "report.md").read_text()
    assert_results_first(slow, "figure1_client")


def test_summary_csv_has_a_row_per_point_and_metric(reported: tuple[Path, Path]) -> None:
    study, _slow = reported
    summary = pd.read_csv(study / "report" / "summary.csv")
    assert list(summary.columns[: len(SUMMARY_HEAD)]) == SUMMARY_HEAD
    assert {m.name for m in METRICS} <= set(summary["metric"])
    model = summary["metric"].str.startswith("frame_model:")
    per_point = summary[~model]
    assert len(per_point) == 9 * per_point["metric"].nunique()
    assert summary.loc[model, "initial_window_size"].isna().all()  # one row per coefficient
    assert (summary["confidence"] == 0.90).all()
    ok = load_run(study).ok
    at = summary.query("metric == 'client_response_s' and initial_window_size == 65535").iloc[0]
    measured = ok.loc[ok["initial_window_size"] == 65535, "client_response_s"]
    assert at["mean"] == pytest.approx(measured.mean())
    assert at["n"] == len(measured) == 5


def test_two_runs_are_compared_side_by_side(reported: tuple[Path, Path]) -> None:
    study, slow = reported
    compare = study / "report" / "compare-slow-link"
    markdown = (compare / "report.md").read_text()
    assert "| config.link.rate_mbit | unset | 100 |" in markdown
    assert "slow-link - study" in markdown
    for stem in ("figure1_client", "figure2_server", "figure3_cpu_pct", "frames_per_byte"):
        assert (compare / "figures" / f"{stem}.png").exists()
        assert (compare / "figures" / f"{stem}.svg").exists()
    table = pd.read_csv(compare / "comparison.csv")
    assert len(table) == 9 * table["metric"].nunique()
    response = table.query("metric == 'client_response_s' and initial_window_size == 256")
    assert bool(response["differs"].iloc[0])  # the slow-link model is faster at 256
    # Both reports link to the comparison, and the links resolve.
    for run, prefix in ((study, ""), (slow, "../../study/report/")):
        text = (run / "report" / "report.md").read_text()
        link = f"{prefix}compare-slow-link/report.html"
        assert f"]({link})" in text
        assert (run / "report" / link).resolve() == (compare / "report.html").resolve()
    for link in re.findall(r"\]\((\.\./[^)]+)\)", markdown):
        assert (compare / link).exists(), link


def test_errors_are_one_line_and_nothing_is_written(
    run_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text('{"format_version": 1, "axes": ["initial_window_size"]}')
    assert main(["report", str(run_copy), str(broken)]) == 2
    error = capsys.readouterr().err
    assert (
        error
        == f"h2iot: error: {broken / 'trials.csv'}: no such file (the run has no trial table)\n"
    )
    assert not (run_copy / "report").exists()

    assert main(["report", str(run_copy), str(run_copy)]) == 2
    assert "the same run given twice" in capsys.readouterr().err
    assert main(["report", "--target-half-width", "2", str(run_copy)]) == 2
    assert "must be in (0, 1)" in capsys.readouterr().err

    other = record_run(
        tmp_path / "grid",
        windows=(1024, 65535),
        extra_axis=("max_concurrent_streams", (1, 100)),
        repetitions=2,
        power=False,
    )
    assert main(["report", str(run_copy), str(other)]) == 2
    assert "only runs sweeping the same settings can be compared" in capsys.readouterr().err


def test_a_grid_run_without_power_traces_still_reports(tmp_path: Path) -> None:
    run_dir = record_run(
        tmp_path / "grid",
        windows=(1024, 4096, 65535),
        extra_axis=("max_concurrent_streams", (1, 100)),
        repetitions=3,
        power=False,
    )
    files = write_report(load_run(run_dir))
    markdown = files.markdown.read_text()
    assert "No power traces saved for the representative trials" in markdown
    assert_results_first(markdown, "figure1_client")
    assert not (files.directory / "figures" / "power_traces.png").exists()
    assert "| finding | series | study | this run | verdict |" in markdown
    assert "max_concurrent_streams = 100" in markdown
    summary = pd.read_csv(files.summary_csv)
    assert list(summary.columns[:3]) == ["metric", "initial_window_size", "max_concurrent_streams"]
    per_point = summary[~summary["metric"].str.startswith("frame_model:")]
    assert len(per_point) == 6 * per_point["metric"].nunique()


def test_a_categorical_axis_becomes_one_series_per_value(tmp_path: Path) -> None:
    """window_update_policy swept beside the window: a series per policy, text in the tables."""
    run_dir = record_run(
        tmp_path / "policies",
        windows=(1024, 4096, 65535),
        extra_axis=("window_update_policy", ("half", "every-frame")),  # type: ignore[arg-type]
        repetitions=3,
    )
    run = load_run(run_dir)
    assert run.axis_kinds == {"initial_window_size": "int", "window_update_policy": "category"}
    files = write_report(run)
    markdown = files.markdown.read_text()
    assert "window_update_policy = every-frame" in markdown
    assert_results_first(markdown, "figure1_client")
    assert "| 4096 | every-frame |" in markdown
    summary = pd.read_csv(files.summary_csv)
    per_point = summary[~summary["metric"].str.startswith("frame_model:")]
    assert set(per_point["window_update_policy"]) == {"half", "every-frame"}
    assert len(per_point) == 6 * per_point["metric"].nunique()
    assert (files.directory / "figures" / "figure1_client.png").exists()


def test_the_report_says_which_nodes_were_emulated_and_what_that_reproduces(
    tmp_path: Path,
) -> None:
    server = {
        "profile": "rpi3b",
        "speed_fraction": 0.08,
        "cpu_quota": 0.0912,
        "memory_mib": 1024,
        "host": "10.0.0.2",
        "measured_speed_fraction": 0.0771,
    }
    run_dir = record_run(
        tmp_path / "emulated",
        windows=(4096, 65535),
        repetitions=3,
        power=False,
        device={"emulated": True, "nodes": {"server": server}, "link": None},
    )
    # Beside a run on unthrottled cores (below); writing both reports writes its own too.
    plain = record_run(tmp_path / "plain", windows=(4096, 65535), repetitions=3, power=False)
    assert main(["report", str(run_dir), str(plain)]) == 0
    markdown = (run_dir / "report" / "report.md").read_text()
    assert_results_first(markdown, "figure1_client")
    assert "server emulated as rpi3b on 10.0.0.2" in markdown.splitlines()[2]
    assert (
        "- server (h2): emulated rpi3b on 10.0.0.2: CPU quota 0.0912 of a core, measured at "
        "0.077 of its host's core (aimed at 0.08), 1024 MiB\n"
    ) in markdown
    assert "- client (h2): this machine's own core, unthrottled" in markdown
    assert f"- {EMULATION_CAVEAT}" in markdown
    assert (
        "An emulated node is drawn in percent of its emulated core, as the study's Pi numbers "
        "are: its CPU % of the host's core divided by its CPU quota (server 0.0912)"
    ) in markdown
    # Beside the run on unthrottled cores, its Figure 3 says whose lines are of the emulated core.
    compared = (run_dir / "report" / "compare-plain" / "report.md").read_text()
    assert (
        "Figure 3: CPU %, both runs. emulated: An emulated node is drawn in percent of its "
        "emulated core, as the study's Pi numbers are: its CPU % of the host's core divided by "
        "its CPU quota (server 0.0912)"
    ) in compared

    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["config"]["link"].update(delay_ms=0.5, delay_method="relay")
    manifest_path.write_text(json.dumps(manifest))
    markdown = write_report(load_run(run_dir)).markdown.read_text()
    assert EMULATION_CAVEAT not in markdown
    assert f"- {delayed_caveat(0.5, 'relay')}" in markdown
    assert "The link's 0.5 ms each way (added by a relay between the nodes' namespaces)" in markdown


def test_the_h2iot_command_finds_report(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"format_version": 7}))
    result = subprocess.run(
        [sys.executable, "-m", "controller.cli", "report", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"h2iot: error: {tmp_path / 'manifest.json'}: format_version: 7 is not supported "
        "(this reader knows 1..2)"
    ]
