from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from analysis.columns import METRICS
from analysis.figures import Source, figure_cpu_pct
from analysis.load import Run, load_run
from analysis.points import (
    EXTRA_COLUMNS,
    FLOOR_COLUMNS,
    SCALED_COLUMNS,
    SUMMARY_COLUMNS,
    metric_rows,
    per_emulated_core,
    summarize_points,
    tukey_outliers,
    with_derived,
)
from tests.analysis.fake_run import record_run


def _run(rows: list[dict[str, object]], confidence: float = 0.90) -> Run:
    table = pd.DataFrame(rows)
    for metric in METRICS:
        if metric.name not in table:
            table[metric.name] = 1.0
    table["trial_id"] = [f"t{i}" for i in range(len(table))]
    table["status"] = "ok"
    manifest = {"format_version": 1, "config": {"run": {"confidence": confidence}}}
    failed = pd.DataFrame(columns=["trial_id", "attempt", "error"])
    return Run(Path("hand"), manifest, ("initial_window_size",), table, len(table), failed)


def test_hand_computed_point() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    run = _run([{"initial_window_size": 256, "client_response_s": v} for v in values])
    row = summarize_points(run).query("metric == 'client_response_s'").iloc[0]
    assert (row["n"], row["mean"], row["median"]) == (4, 2.5, 2.5)
    assert row["sd"] == pytest.approx(math.sqrt(5 / 3))
    half = 2.353363 * math.sqrt(5 / 3) / 2  # t(0.95, 3)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((2.5 - half, 2.5 + half), rel=1e-6)
    assert row["relative_half_width"] == pytest.approx(half / 2.5, rel=1e-6)
    assert row["confidence"] == 0.90


def test_one_value_and_zero_variance_points() -> None:
    rows = [{"initial_window_size": 256, "client_cpu_s": 0.5}] + [
        {"initial_window_size": 512, "client_cpu_s": 0.25} for _ in range(3)
    ]
    summary = summarize_points(_run(rows)).query("metric == 'client_cpu_s'")
    one, flat = summary.iloc[0], summary.iloc[1]
    assert one["n"] == 1 and math.isnan(one["ci_low"]) and pd.isna(one["reps_needed"])
    assert (flat["sd"], flat["ci_low"], flat["ci_high"]) == (0.0, 0.25, 0.25)
    assert flat["reps_needed"] == 2


def test_outliers_are_counted_never_dropped_and_missing_cells_are_counted() -> None:
    values = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 50.0, math.nan]
    run = _run([{"initial_window_size": 4096, "energy_mj": v} for v in values])
    row = summarize_points(run).query("metric == 'energy_mj'").iloc[0]
    assert row["outliers"] == 1
    assert row["missing"] == 1
    assert row["n"] == 7
    assert row["mean"] == pytest.approx(np.mean(values[:7]))
    assert tukey_outliers([1.0, 2.0, 100.0]) == 0  # below 4 values there are no fences


def test_frames_per_byte_are_derived_per_trial() -> None:
    table = pd.DataFrame(
        {
            "client_bytes_received": [1000.0, 0.0],
            "client_data_frames": [10.0, 3.0],
            "client_window_update_frames": [20.0, 3.0],
        }
    )
    derived = with_derived(table)
    assert derived["client_data_frames_per_byte"].iloc[0] == 0.01
    assert derived["client_window_update_frames_per_byte"].iloc[0] == 0.02
    assert math.isnan(derived["client_data_frames_per_byte"].iloc[1])  # no bytes: no ratio


def test_a_recorded_run_matches_scipy_at_every_point(run_copy: Path) -> None:
    run = load_run(run_copy)
    summary = summarize_points(run)
    assert list(summary.columns) == [
        "metric",
        "initial_window_size",
        *SUMMARY_COLUMNS,
        *EXTRA_COLUMNS,
        *FLOOR_COLUMNS,
    ]
    assert len(summary) == 9 * (len(METRICS) + 2)
    for _, row in summary.iterrows():
        values = run.ok.loc[run.ok["initial_window_size"] == row["initial_window_size"]]
        data = with_derived(values)[row["metric"]].to_numpy()
        if data.std() == 0:  # the model's frame counts are exact
            assert row["ci_low"] == row["ci_high"] == data[0]
            continue
        low, high = scipy_stats.t.interval(
            0.90, data.size - 1, loc=data.mean(), scale=scipy_stats.sem(data)
        )
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-9)


def test_two_axes_give_a_row_per_grid_point(tmp_path: Path) -> None:
    run_dir = record_run(
        tmp_path / "grid",
        windows=(1024, 65535),
        extra_axis=("max_concurrent_streams", (1, 100)),
        repetitions=2,
        power=False,
    )
    summary = summarize_points(load_run(run_dir))
    response = summary.query("metric == 'client_response_s'")
    assert list(
        zip(response["initial_window_size"], response["max_concurrent_streams"], strict=True)
    ) == [
        (1024, 1),
        (1024, 100),
        (65535, 1),
        (65535, 100),
    ]
    assert (response["n"] == 2).all()


def test_an_emulated_nodes_cpu_pct_is_drawn_in_percent_of_its_emulated_core() -> None:
    """Figure 3 and the study's Pi numbers: CPU % of the host's core over the node's quota, for
    the emulated role only; every other value and the summary passed in stay as they were."""
    rows = [
        {"initial_window_size": window, "client_cpu_pct": pct, "server_cpu_pct": pct / 2}
        for window, pcts in ((4096, (4.0, 5.0, 6.0)), (65535, (8.0, 9.0, 10.0)))
        for pct in pcts
    ]
    summary = summarize_points(_run(rows))
    before = summary.copy()
    scaled = per_emulated_core(summary, {"client": 0.1})
    pd.testing.assert_frame_equal(summary, before)
    client, host = metric_rows(scaled, "client_cpu_pct"), metric_rows(summary, "client_cpu_pct")
    for column in SCALED_COLUMNS:
        np.testing.assert_allclose(client[column], host[column] / 0.1)
    assert list(client["mean"]) == pytest.approx([50.0, 90.0])
    np.testing.assert_array_equal(client["n"], host["n"])
    others = scaled[scaled["metric"] != "client_cpu_pct"]
    pd.testing.assert_frame_equal(others, summary[summary["metric"] != "client_cpu_pct"])

    figure = figure_cpu_pct([Source(scaled, ("initial_window_size",))], ["client"])
    (ax,) = figure.axes
    drawn = {bars.get_label(): list(bars.lines[0].get_ydata()) for bars in ax.containers}
    assert drawn == {"client CPU": pytest.approx([50.0, 90.0]), "server CPU": [2.5, 4.5]}
    assert ax.get_ylabel() == "% of one core\nclient: of the emulated core"
