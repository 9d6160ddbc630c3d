"""The breakdown search's report section and the stream figure, from files a run would hold."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from analysis.breakdown import breakdown_blocks, cell_text, read_breakdown
from analysis.document import Table, to_markdown
from analysis.errors import RunFormatError
from analysis.workloads.stream import figure_received_rate
from controller.sweep.search_run import BREAKDOWN_COLUMNS

SEARCH = {
    "param": "payload_doubles",
    "low": 1,
    "high": 4_000_000,
    "metric": "stream_received_rate_hz",
    "relative_to": "stream_demanded_rate_hz",
    "threshold": 0.75,
    "holds": "at_least",
    "repetitions": 3,
    "max_repetitions": 12,
    "resolution": 1.25,
    "unit_bytes": 8,
}
MANIFEST = {
    "config": {
        "run": {"confidence": 0.9},
        "sweep": {"transport": ["grpc", "websocket", "sse"], "rate_hz": [25, 10, 4]},
        "search": SEARCH,
    }
}


def _row(
    transport: str, rate: int, status: str, passing: float, failing: float
) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(BREAKDOWN_COLUMNS, "")
    row.update(transport=transport, rate_hz=rate, param="payload_doubles", status=status)
    if status == "found":
        middle = (passing * failing) ** 0.5
        row.update(
            breakdown=middle, passing=passing, failing=failing, passing_n=3,
            passing_mean=0.9, passing_ci_low=0.85, passing_ci_high=0.95, failing_n=6,
            failing_mean=0.5, failing_ci_low=0.4, failing_ci_high=0.6,
            mb_s=middle * 8 * rate / 1e6, probes=9, forced_probes=1, trials=30,
        )  # fmt: skip
    return row


def _write(run: Path, rows: list[dict[str, object]]) -> None:
    run.mkdir(exist_ok=True)
    with (run / "breakdown.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["transport", "rate_hz", *BREAKDOWN_COLUMNS])
        writer.writeheader()
        writer.writerows(rows)


def test_the_table_is_shaped_like_the_references(tmp_path: Path) -> None:
    rows = [
        _row(transport, rate, "found", 40_000 * k, 50_000 * k)
        for transport, k in (("grpc", 8), ("websocket", 1), ("sse", 1))
        for rate in (25, 10)
    ]
    rows.append(_row("grpc", 4, "above_high", 0, 0))
    rows.append(_row("sse", 4, "failed", 0, 0))
    _write(tmp_path, rows)
    markdown = to_markdown(breakdown_blocks(tmp_path, MANIFEST))
    assert "| transport | rate_hz = 25 | rate_hz = 10 | rate_hz = 4 |" in markdown
    assert "| grpc | ~358k (320k..400k), 71.6 MB/s | ~358k (320k..400k), 28.6 MB/s | > 4M |" in (
        markdown
    )
    assert "| websocket | ~44.7k (40k..50k), 8.94 MB/s | ~44.7k (40k..50k), 3.58 MB/s | - |" in (
        markdown
    )
    assert "| sse | ~44.7k (40k..50k), 8.94 MB/s | ~44.7k (40k..50k), 3.58 MB/s | failed |" in (
        markdown
    )
    assert "0.9 [0.85, 0.95] n=3" in markdown and "0.5 [0.4, 0.6] n=6" in markdown
    assert "stream_received_rate_hz / stream_demanded_rate_hz stops being at least 0.75" in markdown


def test_a_run_that_was_no_search_has_no_section(tmp_path: Path) -> None:
    assert breakdown_blocks(tmp_path, {"config": {"sweep": {"x": [1]}}}) == []
    assert breakdown_blocks(tmp_path, MANIFEST) == []  # a search stopped before its first group


def test_one_axis_gets_the_list_only_and_a_malformed_file_is_named(tmp_path: Path) -> None:
    manifest = {"config": {"sweep": {"mode": ["a"]}, "search": {**SEARCH, "unit_bytes": None}}}
    (tmp_path / "breakdown.csv").write_text("mode,status\na,found\n")
    with pytest.raises(RunFormatError, match=r"breakdown.csv: column breakdown: missing"):
        read_breakdown(tmp_path, ["mode"])
    (tmp_path / "breakdown.csv").write_text(
        "mode,status,breakdown,passing,failing\na,below_low,1,,1\n"
    )
    blocks = breakdown_blocks(tmp_path, manifest)
    tables = [b for b in blocks if isinstance(b, Table)]
    assert len(tables) == 1 and tables[0].rows[0][:2] == ("a", "< 1")


def test_a_cell_without_unit_bytes_has_no_mb_s() -> None:
    row = {"status": "found", "breakdown": 2000, "passing": 1000, "failing": 4000, "mb_s": ""}
    assert cell_text(row, SEARCH) == "~2k (1k..4k)"


def _summary(rows: list[tuple[str, int, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "metric": "stream_received_rate_hz",
                "transport": transport,
                "rate_hz": rate,
                "payload_doubles": payload,
                "n": 3,
                "mean": mean,
                "ci_low": mean - 0.5,
                "ci_high": mean + 0.5,
                "confidence": 0.9,
            }
            for transport, rate, payload, mean in rows
        ]
    )


def test_the_stream_figure_has_a_panel_per_rate_and_a_line_per_transport() -> None:
    rows = [
        (transport, rate, payload, rate * (1.0 if payload < 10_000 else 0.5))
        for transport in ("grpc", "sse")
        for rate in (4, 25)
        for payload in (1, 1000, 100_000)
    ]
    figure = figure_received_rate(_summary(rows), ("payload_doubles", "transport", "rate_hz"))
    assert figure is not None
    panels = figure.axes
    assert [ax.get_title() for ax in panels] == ["rate_hz = 25", "rate_hz = 4"]
    for ax, rate in zip(panels, (25, 4), strict=True):
        labels = ax.get_legend_handles_labels()[1]
        assert sorted(labels) == ["75% of demand", "demanded", "grpc", "sse"]
        assert ax.get_xscale() == "log"
        demand = [line for line in ax.get_lines() if line.get_label() == "demanded"]
        assert demand[0].get_ydata()[0] == rate


def test_no_payload_axis_no_stream_figure() -> None:
    summary = _summary([("grpc", 4, 1, 4.0)])
    assert figure_received_rate(summary, ("transport", "rate_hz")) is None
    assert figure_received_rate(summary.iloc[0:0], ("payload_doubles",)) is None
