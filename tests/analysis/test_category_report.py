"""A run sweeping a category axis opens its findings with the comparison it was made for
(issue 36): per point, each series against the reference (for protocol, the HTTP/2 present,
over TLS where it is), the difference with its Welch interval and whether it is resolvable; its
headline figure draws the series side by side with labels that do not run into each other."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

from analysis.categories import category_axes, reference_of, series_of
from analysis.figures import Source, figure_client
from analysis.load import load_run
from analysis.points import metric_rows, summarize_points, summary_of
from analysis.stats import welch_difference
from tests.analysis.fake_run import STUDY_WINDOWS, record_run
from tests.analysis.report_text import FIRST_SCREEN_LINES, assert_results_first

HEADER = (
    "| metric | initial_window_size | h2 (reference) | h3 | h3 - h2 [90 % Welch CI] | relative "
    "| resolvable |"
)


def _sections(markdown: str) -> list[str]:
    return [line[3:] for line in markdown.splitlines() if line.startswith("## ")]


def test_an_h2_h3_run_opens_with_h3_against_h2_per_window(protocols_report: Path) -> None:
    markdown = (protocols_report / "report" / "report.md").read_text()
    assert_results_first(markdown, "figure1_client")
    assert _sections(markdown)[:2] == ["h3 against h2 (protocol)", "Against the study's findings"]
    lines = markdown.splitlines()
    header = lines.index(HEADER)
    assert header < FIRST_SCREEN_LINES
    rows = [line.split(" | ") for line in itertools.takewhile(bool, lines[header + 2 :])]
    # Five metrics at two windows, metric by metric.
    assert [(r[0].lstrip("| "), r[1]) for r in rows] == [
        (label, window)
        for label in (
            "client energy (mJ)",
            "client energy above idle (mJ)",
            "client CPU time (s)",
            "server CPU time (s)",
            "client response time (s)",
        )
        for window in ("4096", "65535")
    ]
    # The first row's difference is the Welch difference of the two series' summaries.
    summary = metric_rows(summarize_points(load_run(protocols_report)), "energy_mj")
    at = summary[summary["initial_window_size"] == 4096]
    h2, h3 = (summary_of(at[at["protocol"] == p].iloc[0]) for p in ("h2", "h3"))
    difference = welch_difference(h2, h3, 0.90)
    assert rows[0][4] == (
        f"{difference.estimate:.4g} [{difference.ci_low:.4g}, {difference.ci_high:.4g}]"
    )
    assert rows[0][5] == f"{(h3.mean / h2.mean - 1) * 100:+.1f} %"
    assert rows[0][6].rstrip(" |").startswith(("resolved", "below"))


def test_the_cpu_pct_findings_of_a_run_with_both_windows_judge_the_rise(
    protocols_report: Path,
) -> None:
    markdown = (protocols_report / "report" / "report.md").read_text()
    assert "needs windows" not in markdown
    assert "flat not judged: it needs two windows up to 4096, the run has one" in markdown


@pytest.mark.parametrize(
    ("axis", "series", "reference"),
    [
        ("protocol", ("h2", "h3"), "h2"),
        ("protocol", ("h3", "h2c", "h2"), "h2"),  # over TLS, as HTTP/3 is
        ("protocol", ("h3", "h2c"), "h2c"),
        ("encoding", ("soap", "dime"), "soap"),  # no declared reference: the config's first
        ("mode", ("concurrent", "sequential"), "concurrent"),
    ],
)
def test_the_reference_series(axis: str, series: tuple[str, ...], reference: str) -> None:
    assert reference_of(axis, series) == reference


def test_series_keep_the_configs_order_and_other_category_runs_compare_too(
    workload_reports: dict[str, Path],
) -> None:
    blob = load_run(workload_reports["blob"])
    assert category_axes(blob) == ("mode",)
    assert series_of(blob, "mode") == ("sequential", "concurrent")
    markdown = (workload_reports["blob"] / "report" / "report.md").read_text()
    assert _sections(markdown)[:2] == ["concurrent against sequential (mode)", "Main result"]
    stream = load_run(workload_reports["stream"])
    assert category_axes(stream) == ()  # payload_doubles is a number
    stream_report = (workload_reports["stream"] / "report" / "report.md").read_text()
    assert _sections(stream_report)[0] == "Main result"


def _text_boxes(ax: Axes, renderer: RendererBase) -> list[Bbox]:
    texts = [ax.xaxis.label, ax.yaxis.label, *ax.get_xticklabels(), *ax.get_yticklabels()]
    return [t.get_window_extent(renderer) for t in texts if t.get_visible() and t.get_text()]


def test_figure_1_of_an_h2_h3_run_keeps_each_panels_labels_to_itself(tmp_path: Path) -> None:
    """Measured in the drawn figure: no axis or tick label of a panel meets another panel's (the
    joined window label ran across all three, issue 36)."""
    run = load_run(
        record_run(
            tmp_path / "run",
            windows=STUDY_WINDOWS,
            extra_axis=("protocol", ("h2", "h3")),
            repetitions=2,
            power=False,
        )
    )
    figure = figure_client([Source(summarize_points(run), run.axes, protocols=run.protocols)])
    assert isinstance(figure.canvas, FigureCanvasAgg)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert len(panels) == 3
    assert {ax.get_xlabel() for ax in panels} == {"stream window (B, log2)"}
    boxes = [_text_boxes(ax, renderer) for ax in panels]
    for (i, mine), (j, theirs) in itertools.permutations(enumerate(boxes), 2):
        overlaps = [(a, b) for a in mine for b in theirs if a.overlaps(b)]
        assert not overlaps, (i, j, overlaps)
        # Nor do a panel's labels reach into another panel's plotting area.
        area = panels[j].get_window_extent(renderer)
        assert not [a for a in mine if a.overlaps(area)], (i, j)


def test_a_finding_below_the_floor_in_both_series_is_one_warning(protocols_report: Path) -> None:
    """Two series, one line: the first screen has room for few warnings."""
    head = (protocols_report / "report" / "report.md").read_text().split("\n## ", 1)[0]
    warnings = [line for line in head.splitlines() if line.startswith("- The finding ")]
    assert len(warnings) == len({line.split("'")[1] for line in warnings}) >= 1, warnings
    assert warnings[0].startswith(
        "- The finding 'client energy above idle settles from 4096 up' (protocol = h2; "
        "protocol = h3) rests on a difference between 4096 and 65535 below the meter's floor "
        "(up to "
    )
