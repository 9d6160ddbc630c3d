"""The periodic workload's report (analysis.workloads.periodic): the battery view's day, the
headline figure by connection policy, and the findings on HTTP/3 against HTTP/2 per report
with the reversal between keep and new."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from analysis.columns import METRICS
from analysis.document import Paragraph, Table
from analysis.load import Run
from analysis.points import summarize_points
from analysis.workloads.periodic import (
    PER_REPORT,
    PER_REPORT_ABOVE_IDLE,
    battery_blocks,
    battery_points,
    figure_battery,
    figure_per_report,
    findings_blocks,
)

IDLE_MW = 1200.0
# Per (protocol, connection): the mean energy per report above idle (mJ). HTTP/3 dearer on a
# kept connection, cheaper on new ones: a reversal.
ABOVE = {
    ("h2", "keep"): 10.0,
    ("h3", "keep"): 14.0,
    ("h2", "new"): 40.0,
    ("h3", "new"): 30.0,
    ("h2", "resume"): 25.0,
    ("h3", "resume"): 25.5,
}


def _run(tmp_path: Path, interval_s: float = 1.0, repetitions: int = 6) -> Run:
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for (protocol, connection), above in ABOVE.items():
        for repetition in range(1, repetitions + 1):
            per_report = above * rng.lognormal(0.0, 0.03)
            rows.append(
                {
                    **{metric.name: 1.0 for metric in METRICS},
                    "trial_id": f"t{len(rows):03d}",
                    "repetition": repetition,
                    "protocol": protocol,
                    "connection": connection,
                    "energy_mj": 20 * (per_report + IDLE_MW * interval_s),
                    "energy_above_idle_mj": 20 * per_report,
                    PER_REPORT: per_report + IDLE_MW * interval_s,
                    PER_REPORT_ABOVE_IDLE: per_report,
                }
            )
    manifest: dict[str, Any] = {
        "axes": ["protocol", "connection"],
        "idle_baseline_mw": IDLE_MW,
        "workload": {
            "kind": "periodic",
            "columns": [{"name": PER_REPORT}, {"name": PER_REPORT_ABOVE_IDLE}],
        },
        "config": {
            "run": {"confidence": 0.9},
            "sweep": {"protocol": ["h2", "h3"], "connection": ["keep", "new", "resume"]},
            "workload": {"kind": "periodic", "interval_s": interval_s},
            "meter": {"supply_v": 5.0},
        },
    }
    ok = pd.DataFrame(rows)
    return Run(tmp_path, manifest, ("protocol", "connection"), ok, len(rows), pd.DataFrame())


def test_a_day_of_reports_against_a_day_idle() -> None:
    summary = pd.DataFrame(
        [
            {"metric": PER_REPORT_ABOVE_IDLE, "interval_s": 10.0, "n": 5, "mean": 36.0,
             "ci_low": 30.0, "ci_high": 42.0},
            {"metric": PER_REPORT_ABOVE_IDLE, "interval_s": 0.0, "n": 5, "mean": 36.0,
             "ci_low": 30.0, "ci_high": 42.0},
        ]
    )  # fmt: skip
    (point,) = battery_points(summary, ("interval_s",), 1.0, idle_mw=500.0, volts=4.0)
    # 8640 reports of 36 mJ: 311.04 J; at 4 V, 1 mAh is 14.4 J.
    assert point.reports_per_day == 8640
    assert point.reports_j_per_day == pytest.approx(311.04)
    assert point.reports_mah_per_day == pytest.approx(311.04 / 14.4)
    # 500 mW all day: 43.2 kJ, 3000 mAh at 4 V.
    assert point.idle_j_per_day == pytest.approx(43_200.0)
    assert point.idle_mah_per_day == pytest.approx(3000.0)
    assert point.reports_share == pytest.approx(311.04 / (311.04 + 43_200.0))


def test_the_battery_view_uses_the_configs_interval_and_says_idle_dominates(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path, interval_s=60.0)
    blocks = battery_blocks(run, summarize_points(run))
    paragraph, table = blocks[1], blocks[2]
    assert isinstance(paragraph, Paragraph) and isinstance(table, Table)
    assert "idle dominates the day at every point" in paragraph.text
    assert table.header[:3] == ("protocol", "connection", "interval (s)")
    assert len(table.rows) == 6
    keep_h2 = next(row for row in table.rows if row[:2] == ("h2", "keep"))
    assert keep_h2[2] == "60" and keep_h2[4] == "1440"


def test_h3_against_h2_per_report_states_each_policy_and_the_reversal(tmp_path: Path) -> None:
    run = _run(tmp_path)
    blocks = findings_blocks(run, summarize_points(run))
    paragraph = blocks[1]
    assert isinstance(paragraph, Paragraph)
    text = paragraph.text
    keep = re.search(r"At connection = keep, h3 costs more than h2: ([-\d.]+) mJ", text)
    new = re.search(r"At connection = new, h3 costs less than h2: ([-\d.]+) mJ", text)
    assert keep and float(keep.group(1)) == pytest.approx(4.0, rel=0.2)
    assert new and float(new.group(1)) == pytest.approx(-10.0, rel=0.2)
    assert "90 % Welch interval [" in text
    assert "Reversal: h3 against h2 reverses between keep (" in text
    table = blocks[2]
    assert isinstance(table, Table)
    assert len(table.rows) == 6  # two metrics x three policies


def test_no_reversal_is_said_when_the_order_holds(tmp_path: Path) -> None:
    run = _run(tmp_path)
    new = run.ok["connection"] == "new"
    ok = run.ok.copy()
    ok.loc[new & (ok["protocol"] == "h3"), PER_REPORT_ABOVE_IDLE] *= 2.0
    run = Run(tmp_path, run.manifest, run.axes, ok, run.attempts, run.failed)
    paragraph = findings_blocks(run, summarize_points(run))[1]
    assert isinstance(paragraph, Paragraph)
    assert "No reversal between keep and new" in paragraph.text


def test_the_headline_figure_puts_the_policies_on_x_and_keeps_labels_apart(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    figure = figure_per_report(run, summarize_points(run))
    assert figure is not None
    assert isinstance(figure.canvas, FigureCanvasAgg)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    panels = figure.axes
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["keep", "new", "resume"]
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == ["h2", "h3"]
    # Beside the panels, not on them.
    assert not [ax for ax in panels if legend.get_window_extent(renderer).overlaps(
        ax.get_window_extent(renderer))]  # fmt: skip
    boxes = [
        [
            t.get_window_extent(renderer)
            for t in (ax.xaxis.label, ax.yaxis.label, ax.title, *ax.get_xticklabels())
            if t.get_text()
        ]
        for ax in panels
    ]
    for (i, mine), (j, theirs) in itertools.permutations(enumerate(boxes), 2):
        assert not [(a, b) for a in mine for b in theirs if a.overlaps(b)], (i, j)
    figure.savefig(tmp_path / "headline.png")


def test_the_battery_figure_draws_a_bar_pair_per_point(tmp_path: Path) -> None:
    run = _run(tmp_path)
    points = battery_points(summarize_points(run), run.axes, 1.0, IDLE_MW, 5.0)
    figure = figure_battery(points)
    assert figure is not None
    (ax,) = figure.axes
    assert len(ax.patches) == len(points) == 6
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert legend == {"reports, above idle", "node idle all day (5760)"}
    figure.savefig(tmp_path / "battery.png")
    assert figure_battery([]) is None


def test_a_point_at_or_below_idle_is_said_and_drawn_as_such(tmp_path: Path) -> None:
    run = _run(tmp_path)
    ok = run.ok.copy()
    ok.loc[(ok["protocol"] == "h2") & (ok["connection"] == "keep"), PER_REPORT_ABOVE_IDLE] = -1.0
    run = Run(tmp_path, run.manifest, run.axes, ok, run.attempts, run.failed)
    summary = summarize_points(run)
    paragraph = battery_blocks(run, summary)[1]
    assert isinstance(paragraph, Paragraph)
    assert "1 of 6 points measured no more than idle per report" in paragraph.text
    figure = figure_battery(battery_points(summary, run.axes, 1.0, IDLE_MW, 5.0))
    assert figure is not None
    (ax,) = figure.axes
    assert [t.get_text() for t in ax.texts] == ["at or below idle"]
