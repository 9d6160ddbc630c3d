"""Energy per event end to end: a small run of configs/h3.toml with traces (h2 and h3 on our
agents, two windows, three repetitions) gives each ok row its traced counts, which agree with
the row's own frame and datagram counters; its report holds the per-event costs and the h3 - h2
split by event class, and its phase figure marks the client's events. ngtcp2's own qlog, as a
real gtlsclient wrote it, is counted too."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.load import Run, load_run
from analysis.phases import figure_phase_traces, representatives
from analysis.qlog_counts import client_marks
from analysis.report import write_report
from tests.conftest import require_tool, swept_ok

SMALL = (
    "--set", "run.idle_baseline_s=1", "--set", "run.events=true",
    "--set", "workload.total_bytes=300000",
)  # fmt: skip


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run, _rows = swept_ok(
        "h3.toml", tmp_path_factory.mktemp("runs"), *SMALL,
        "--set", "run.repetitions=3", "--set", "sweep.initial_window_size=[4096, 65535]",
    )  # fmt: skip
    return load_run(run)


def _numbers(rows: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(rows[column])


def test_traced_counts_agree_with_the_rows_counters(traced: Run) -> None:
    ok = traced.ok
    h2, h3 = ok[ok["protocol"] == "h2"], ok[ok["protocol"] == "h3"]
    assert len(h2) == len(h3) == 6
    pd.testing.assert_series_equal(
        h2["client_traced_data_frames_received"], h2["client_data_frames"], check_names=False
    )
    pd.testing.assert_series_equal(
        h2["client_traced_flow_control_frames_sent"],
        h2["client_window_update_frames"],
        check_names=False,
    )
    pd.testing.assert_series_equal(
        h2["server_traced_data_frames_sent"], h2["server_data_frames"], check_names=False
    )
    assert h2["client_traced_packets_sent"].isna().all()
    pd.testing.assert_series_equal(
        h3["client_traced_datagrams_received"],
        _numbers(h3, "client_datagrams_received").astype(float),
        check_names=False,
    )
    assert (h3["client_traced_packets_sent"] >= _numbers(h3, "client_datagrams_sent")).all()
    assert (h3["client_traced_handshake_packets_sent"] > 0).all()
    # qh3 logs no frames and only its first packets received: empty, not zero.
    assert h3["client_traced_ack_frames_sent"].isna().all()
    assert h3["client_traced_packets_received"].isna().all()


def test_the_report_has_the_costs_per_event_and_the_split_by_class(traced: Run) -> None:
    files = write_report(traced)
    markdown = files.markdown.read_text()
    summary = pd.read_csv(files.summary_csv)
    costs = summary[summary["metric"].str.startswith("event_cost:exchange_above_idle_uj:")]
    assert set(costs["protocol"]) == {"h2", "h3"}
    headings = [line[3:] for line in markdown.splitlines() if line.startswith("## ")]
    split = "Where h3's energy differs from h2's, by event class"
    assert headings[:2] == ["h3 against h2 (protocol)", split]
    assert "Energy per event" in headings
    assert headings.index("Energy per event") > headings.index("Per-frame cost model")
    for window in (4096, 65535):
        assert f"*h3 - h2 at initial_window_size {window}*" in markdown
    assert markdown.count("| energy difference (mJ) |") == 2
    # Each class of each series has its row: a cost, or why the run cannot give one (which,
    # depends on the trials' spread).
    for protocol in ("h2", "h3"):
        for name in ("intercept", "wire", "flow_control", "kernel_packets", "softirqs"):
            assert f"| protocol {protocol} | exchange | {name}" in markdown, (protocol, name)
    assert "| protocol h3 | exchange | ack | - | left out: not in this series' traces |" in markdown


def test_the_phase_figure_marks_each_representatives_events(traced: Run) -> None:
    events = {
        str(row["trial_id"]): client_marks(
            traced.path, str(row["trial_id"]), row["t_wall_start_ns"]
        )
        for _point, row in representatives(traced)
    }
    drawn = figure_phase_traces(traced, events)
    assert drawn is not None
    legend = {text.get_text() for text in drawn[0].legends[0].get_texts()}
    assert {"DATA frame received", "WINDOW_UPDATE sent", "packet sent", "datagram received"} <= (
        legend
    )
    assert "Initial/Handshake packet" in legend
    # Placed on the window's clock: every trial's events fall in its window, give or take the
    # marker's lead on the fetch's start.
    for _point, row in representatives(traced):
        times = [t for ts in events[str(row["trial_id"])].values() for t in ts]
        assert min(times) > -0.005 and max(times) < float(row["window_s"]) + 0.005


def test_ngtcp2s_own_qlog_is_counted_by_class(tmp_path: Path) -> None:
    require_tool("gtlsclient", "gtlsserver")
    run, _rows = swept_ok(
        "h3.toml", tmp_path / "runs", *SMALL,
        "--set", "run.repetitions=1", "--set", "sweep.initial_window_size=[4096]",
        "--set", 'sweep.protocol=["h3"]',
        "--set", "nodes.client.engine=nghttp2", "--set", "nodes.server.engine=nghttp2",
    )  # fmt: skip
    (row,) = load_run(run).ok.to_dict("records")
    for kind in ("packets", "ack_frames", "handshake_packets"):
        for direction in ("sent", "received"):
            assert row[f"client_traced_{kind}_{direction}"] > 0, (kind, direction)
    # A 4096-byte window over a 300 kB page: the client raises it again and again.
    assert row["client_traced_flow_control_frames_sent"] > 300_000 / 4096
    assert row["client_traced_ack_frames_sent"] <= row["client_traced_packets_sent"]
    assert pd.isna(row["client_traced_datagrams_received"])  # ngtcp2 logs packets only
