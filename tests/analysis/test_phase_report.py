"""The report's Energy by phase section (issue 36): per point the mean energy stacked by phase,
the series side by side, the phases' means with their CIs, and the median trial's power with
its phases shaded; nothing for a run without phases, one line for an engine that records none."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from analysis.document import Heading, Paragraph, Table
from analysis.figures import Source
from analysis.load import Run, load_run
from analysis.phases import (
    Spans,
    figure_phase_energy,
    figure_phase_traces,
    phase_blocks,
    representatives,
)
from analysis.points import metric_rows, summarize_points
from analysis.report import write_report
from tests.analysis.fake_run import CONNECT_S, record_run

WINDOWS = (4096, 65535)


@pytest.fixture(scope="module")
def phased(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """An h2+h3 run whose trials recorded their phases."""
    return load_run(
        record_run(
            tmp_path_factory.mktemp("phases") / "run",
            windows=WINDOWS,
            extra_axis=("protocol", ("h2", "h3")),
            repetitions=3,
            phases=True,
        )
    )


def _source(run: Run) -> Source:
    return Source(summarize_points(run), run.axes, protocols=run.protocols)


def test_the_summary_has_each_phase_with_n_mean_and_ci(phased: Run) -> None:
    summary = summarize_points(phased)
    for metric in ("energy_connect_mj", "energy_close_above_idle_mj", "phase_exchange_s"):
        rows = metric_rows(summary, metric)
        assert len(rows) == 4 and (rows["n"] == 3).all()
        assert (rows["ci_low"] < rows["mean"]).all() and (rows["mean"] < rows["ci_high"]).all()


def _bars(ax: Axes) -> dict[str, list[tuple[float, float, float]]]:
    """Per series, each drawn bar as (centre x, bottom, height)."""
    bars: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for container in ax.containers:
        if isinstance(container, BarContainer):
            series = str(container.get_label()).split(":")[0]
            for patch in container.patches:
                bars[series].append(
                    (patch.get_x() + patch.get_width() / 2, patch.get_y(), patch.get_height())
                )
    return bars


def test_the_stacks_are_the_mean_energy_with_the_series_side_by_side(phased: Run) -> None:
    source = _source(phased)
    figure = figure_phase_energy(source)
    assert figure is not None
    for ax, total in ((figure.axes[0], "energy_mj"), (figure.axes[2], "energy_above_idle_mj")):
        bars = _bars(ax)
        assert sorted(bars) == ["protocol = h2", "protocol = h3"]
        means = metric_rows(source.summary, total)
        centres: dict[str, list[float]] = {}
        for series, drawn in bars.items():
            stacks: dict[float, float] = defaultdict(float)
            for x, _bottom, height in drawn:
                stacks[round(x, 9)] += height
            centres[series] = sorted(stacks)
            protocol = series.removeprefix("protocol = ")
            expected = means[means["protocol"] == protocol].sort_values("initial_window_size")
            assert list(stacks.values()) == pytest.approx(expected["mean"].tolist(), rel=1e-9)
        # Side by side: at every window the h2 bar just left of the h3 bar, in the same slot.
        for h2, h3 in zip(centres["protocol = h2"], centres["protocol = h3"], strict=True):
            assert h2 < h3 < h2 + 1 and round(h2) == round(h3)


def _within(value: float, limits: tuple[float, float]) -> bool:
    return min(limits) <= value <= max(limits)


def _texts(figure: Figure, renderer: RendererBase) -> list[tuple[str, Bbox]]:
    """Every visible label, tick label and title, named by its panel, and the legends."""
    found = []
    for index, ax in enumerate(figure.axes):
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label]
        # The locator's ticks beyond the view are labelled but never drawn.
        texts += [t for t in ax.get_xticklabels() if _within(t.get_position()[0], ax.get_xlim())]
        texts += [t for t in ax.get_yticklabels() if _within(t.get_position()[1], ax.get_ylim())]
        found += [
            (f"panel {index}: {t.get_text()}", t.get_window_extent(renderer))
            for t in texts
            if t.get_visible() and t.get_text()
        ]
    found += [
        (f"legend {i}", legend.get_window_extent(renderer))
        for i, legend in enumerate(figure.legends)
    ]
    return found


@pytest.mark.parametrize("which", ["energy", "traces"])
def test_no_label_meets_another_or_a_panel(phased: Run, which: str) -> None:
    """Measured in the drawn figure: no text runs into another text, and none but a panel's
    own tick labels sit inside a plotting area (a legend over the bars hid them)."""
    if which == "energy":
        figure = figure_phase_energy(_source(phased))
    else:
        drawn = figure_phase_traces(phased)
        figure = None if drawn is None else drawn[0]
    assert figure is not None
    assert isinstance(figure.canvas, FigureCanvasAgg)
    figure.canvas.draw()  # the layout places the panels when drawn
    renderer = figure.canvas.get_renderer()
    texts = _texts(figure, renderer)
    for (a, box_a), (b, box_b) in itertools.combinations(texts, 2):
        assert not box_a.overlaps(box_b), (a, b)
    for index, ax in enumerate(figure.axes):
        area = ax.get_window_extent(renderer)
        outside = [name for name, box in texts if not name.startswith(f"panel {index}:")]
        assert not [n for n in outside if dict(texts)[n].overlaps(area)], index


def test_the_traces_are_each_points_median_trial_with_its_connect_zoomed(phased: Run) -> None:
    picks = representatives(phased)
    assert len(picks) == 4
    for point, row in picks:
        window, protocol = point
        energies = phased.ok[
            (phased.ok["initial_window_size"] == window) & (phased.ok["protocol"] == protocol)
        ]["energy_mj"]
        assert row["energy_mj"] == energies.median()  # 3 repetitions: the median is one trial
    drawn = figure_phase_traces(phased)
    assert drawn is not None
    figure, missing = drawn
    assert missing == []
    # A row per window, per protocol the zoom and the slice; the zoom over 3 connect phases.
    assert len(figure.axes) == 2 * 4
    zoom = figure.axes[0]
    assert zoom.get_xlim() == pytest.approx((0.0, 3 * CONNECT_S * 1e3))


def test_event_times_given_are_marked_by_class(phased: Run) -> None:
    trial_id = str(representatives(phased)[0][1]["trial_id"])
    events = {trial_id: {"packet_sent": [0.001, 0.002], "packet_received": [0.003]}}
    drawn = figure_phase_traces(phased, events)
    assert drawn is not None
    zoom = drawn[0].axes[0]
    labels = zoom.get_legend_handles_labels()[1]
    assert {"packet_sent", "packet_received"} <= set(labels)
    legend = drawn[0].legends[0]
    assert {"packet_sent", "packet_received"} <= {t.get_text() for t in legend.get_texts()}


def test_a_short_connect_is_zoomed_over_some_samples_and_the_slice_is_exchanges_middle() -> None:
    spans = Spans(connect_s=0.0008, exchange_s=0.7, close_s=0.0004)
    assert spans.zoom_s(0.001) == pytest.approx((0.0, 0.005))
    assert Spans(0.01, 0.7, 0.0004).zoom_s(0.001) == pytest.approx((0.0, 0.03))
    low, high = spans.slice_s(0.001)
    assert (low + high) / 2 == pytest.approx(0.0008 + 0.35)
    assert high - low == pytest.approx(0.05)
    assert Spans(0.01, 0.02, 0.001).slice_s(0.001) == pytest.approx((0.01, 0.03))
    bounds = [edge for phase in spans.bounds().values() for edge in phase]
    assert bounds == pytest.approx([0.0, 0.0008, 0.0008, 0.7008, 0.7008, 0.7012])


def test_the_report_has_the_section_with_its_table_and_placement(tmp_path: Path) -> None:
    run = load_run(
        record_run(tmp_path / "run", windows=WINDOWS, repetitions=2, phases=True, power=True)
    )
    files = write_report(run)
    markdown = files.markdown.read_text()
    section = markdown.split("## Energy by phase\n", 1)[1].split("\n## ", 1)[0]
    clocks = run.ok["phase_clock"].value_counts()
    assert (
        f"(phase_clock marker), in {clocks['marker']} trials, and through the measured clock "
        f"offset (clock_offset) in {clocks['clock_offset']} trials." in section
    )
    assert "figures/phase_energy.png" in section and "figures/phase_traces.png" in section
    # Drawn in the section only, not again among the other figures.
    assert markdown.count("figures/phase_traces.png)") == 1
    summary = summarize_points(run)
    connect = metric_rows(summary, "energy_connect_mj").iloc[0]
    assert f"| initial_window_size = 4096 | total | 2 | {connect['mean']:.4g} [" in section
    assert (files.directory / "figures" / "phase_traces.png").exists()


def test_a_run_without_phases_has_no_section_and_nghttp2_one_line(tmp_path: Path) -> None:
    run = load_run(record_run(tmp_path / "run", windows=WINDOWS, repetitions=2, power=False))
    summary = summarize_points(run)
    assert phase_blocks(run, summary, {}) == []
    assert figure_phase_energy(Source(summary, run.axes)) is None
    assert figure_phase_traces(run) is None
    config = dict(run.manifest["config"]) | {"nodes": {"client": {"engine": "nghttp2"}}}
    nghttp2 = replace(run, manifest={**run.manifest, "config": config})
    (line,) = phase_blocks(nghttp2, summary, {})
    assert isinstance(line, Paragraph) and line.text.startswith("Energy by phase: not recorded.")
    # A run from before phases (no columns at all) says nothing of them, whatever its engine.
    older = replace(nghttp2, ok=nghttp2.ok.drop(columns=["phase_clock"]))
    assert phase_blocks(older, summary, {}) == []


def test_the_table_rows_are_total_then_above_idle_per_point(phased: Run) -> None:
    blocks = phase_blocks(phased, summarize_points(phased), {})
    assert isinstance(blocks[0], Heading)
    (table,) = [b for b in blocks if isinstance(b, Table)]
    assert [row[1] for row in table.rows] == ["total"] * 4 + ["above idle"] * 4
    assert table.header[3:6] == ("connect (mJ)", "exchange (mJ)", "close (mJ)")


def test_a_phase_below_idle_hangs_under_zero_and_the_stack_still_sums(phased: Run) -> None:
    ok = phased.ok.copy()
    # Close a millijoule under idle, exchange the difference over: each trial's sum unchanged.
    ok["energy_exchange_above_idle_mj"] += ok["energy_close_above_idle_mj"] + 1.0
    ok["energy_close_above_idle_mj"] = -1.0
    source = _source(replace(phased, ok=ok))
    figure = figure_phase_energy(source)
    assert figure is not None
    drawn = _bars(figure.axes[2])
    closes = [
        patch
        for container in figure.axes[2].containers
        if isinstance(container, BarContainer) and str(container.get_label()).endswith("close")
        for patch in container.patches
    ]
    assert closes and all(p.get_y() == 0.0 and p.get_height() == -1.0 for p in closes)
    means = metric_rows(source.summary, "energy_above_idle_mj")
    h2 = means[means["protocol"] == "h2"].sort_values("initial_window_size")["mean"]
    stacks: dict[float, float] = defaultdict(float)
    for x, _bottom, height in drawn["protocol = h2"]:
        stacks[round(x, 9)] += height
    assert list(stacks.values()) == pytest.approx(h2.tolist(), rel=1e-9)
