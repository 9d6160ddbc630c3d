"""The window axis says what the swept window sets in the run's protocols: HTTP/2's
SETTINGS_INITIAL_WINDOW_SIZE, QUIC's initial_max_stream_data, or both (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.figures import Source, figure_client, window_note
from analysis.load import load_run
from analysis.manifest import protocols_of
from analysis.points import summarize_points
from tests.analysis.fake_run import record_run

H2_LABEL = "SETTINGS_INITIAL_WINDOW_SIZE (B, log2)"
H3_LABEL = "initial_max_stream_data (B, log2)"
BOTH_LABEL = "stream window (B, log2)"  # short: three panels side by side (issue 36)


def _window_axis_label(run_dir: Path) -> str:
    run = load_run(run_dir)
    figure = figure_client([Source(summarize_points(run), run.axes, protocols=run.protocols)])
    labels = {ax.get_xlabel() for ax in figure.axes}
    assert len(labels) == 1, labels
    return labels.pop()


def _small_run(run_dir: Path, extra_axis: tuple[str, tuple[Any, ...]] | None = None) -> Path:
    return record_run(
        run_dir, windows=(1024, 65535), extra_axis=extra_axis, repetitions=2, power=False
    )


def test_a_run_of_h3_alone_labels_the_window_as_quics(tmp_path: Path) -> None:
    run_dir = _small_run(tmp_path / "h3")
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["config"]["workload"]["protocol"] = "h3"
    manifest_path.write_text(json.dumps(manifest))
    assert _window_axis_label(run_dir) == H3_LABEL


def test_a_run_sweeping_h2_and_h3_names_both_windows(tmp_path: Path) -> None:
    run_dir = _small_run(tmp_path / "both", ("protocol", ("h2", "h3")))
    assert _window_axis_label(run_dir) == BOTH_LABEL
    caption = window_note(("h2", "h3"))
    assert caption == (
        " The stream window is the receiver's per-stream window "
        "(h2: SETTINGS_INITIAL_WINDOW_SIZE; h3: initial_max_stream_data)."
    )
    assert window_note(("h2c", "h2")) == window_note(("h3",)) == ""


def test_an_http2_run_keeps_the_settings_name(tmp_path: Path) -> None:
    assert _window_axis_label(_small_run(tmp_path / "h2c")) == H2_LABEL


def test_compared_runs_label_the_window_by_both_runs_protocols(tmp_path: Path) -> None:
    run = load_run(_small_run(tmp_path / "h2c"))
    summary = summarize_points(run)
    figure = figure_client(
        [
            Source(summary, run.axes, "base", ("h2c",)),
            Source(summary, run.axes, "other", ("h3",)),
        ]
    )
    assert {ax.get_xlabel() for ax in figure.axes} == {BOTH_LABEL}


@pytest.mark.parametrize(
    ("config", "protocols"),
    [
        ({}, ("h2c",)),
        ({"workload": {"protocol": "h2"}}, ("h2",)),
        ({"sweep": {"protocol": ["h2c", "h3"]}, "workload": {"protocol": "h2"}}, ("h2c", "h3")),
    ],
)
def test_the_protocols_are_the_swept_ones_else_the_workloads(
    config: dict[str, Any], protocols: tuple[str, ...]
) -> None:
    assert protocols_of({"config": config}) == protocols
