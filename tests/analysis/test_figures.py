"""Figure axes: the window on log2, other numbers by their spacing, categories as they are."""

from __future__ import annotations

import pandas as pd

from analysis.bounds import Bounds, RttEstimate
from analysis.figures import Source, figure_server, figure_workload


def _summary(axis: str, values: list[object]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "metric": ["blob_latency_max_s"] * len(values),
            axis: values,
            "n": [3] * len(values),
            "mean": [0.01 * (i + 1) for i in range(len(values))],
            "ci_low": [0.009 * (i + 1) for i in range(len(values))],
            "ci_high": [0.011 * (i + 1) for i in range(len(values))],
            "confidence": [0.9] * len(values),
        }
    )


def test_a_categorical_x_axis_keeps_its_values_as_ticks() -> None:
    source = Source(_summary("mode", ["sequential", "concurrent"]), ("mode",))
    assert source.x_axis == "mode"
    figure = figure_workload([source], "blob", ["blob_latency_max_s", "blob_body_bytes"])
    assert figure is not None
    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["concurrent", "sequential"]
    assert ax.get_xscale() == "linear"
    assert ax.get_xlabel() == "mode"


def test_a_numeric_x_axis_is_log2_only_for_powers_of_two() -> None:
    powers = figure_workload(
        [Source(_summary("size_bytes", [1024, 65536]), ("size_bytes",))],
        "blob",
        ["blob_latency_max_s"],
    )
    plain = figure_workload(
        [Source(_summary("requests", [1, 3, 10]), ("requests",))], "blob", ["blob_latency_max_s"]
    )
    assert powers is not None and plain is not None
    assert powers.axes[0].get_xscale() == "log"
    assert powers.axes[0].get_xlabel() == "size_bytes (log2)"
    assert plain.axes[0].get_xscale() == "linear"
    assert plain.axes[0].get_xlabel() == "requests"


def test_a_numeric_axis_wins_the_x_axis_over_a_categorical_one() -> None:
    summary = _summary("size_bytes", [1024, 1024, 65536, 65536])
    summary["mode"] = ["sequential", "concurrent"] * 2
    source = Source(summary, ("mode", "size_bytes"))
    assert source.x_axis == "size_bytes"
    assert [label for label, _rows in source.lines("blob_latency_max_s")] == [
        "mode = concurrent",
        "mode = sequential",
    ]


def test_an_interval_below_zero_does_not_hide_the_points_under_a_bound() -> None:
    """Two trials a point (t = 6.3) put a CI's low end below zero; the log axis the bound
    brings must still start above zero, below the lowest point (a real h2+h3 run's Figure 2
    drew its response times off the panel, issue 36)."""
    summary = _summary("initial_window_size", [4096, 65535])
    summary["metric"] = "server_serve_s"
    summary["mean"], summary["ci_high"] = [2.0, 0.02], [2.2, 0.022]
    summary["ci_low"] = [-0.5, -0.2]
    bounds = Bounds(RttEstimate(2.5e-5, "measured", False), 7.2e6, "median", None, 7, None)
    figure = figure_server([Source(summary, ("initial_window_size",))], [bounds])
    ax = figure.axes[0]
    assert ax.get_yscale() == "log"
    bottom, top = ax.get_ylim()
    assert 0 < bottom < summary["mean"].min() < summary["mean"].max() < top
