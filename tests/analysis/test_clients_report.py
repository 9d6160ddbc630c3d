"""The report's "Client nodes" section from trial_clients.csv (analysis.clients): per node its
attempts, share and start lags, and a warning for each late start."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.clients import SIDE_TABLE, node_starts, read_side_table, report_blocks
from analysis.document import Bullets, Heading, Table, to_markdown
from analysis.errors import RunFormatError
from controller.sweep.merge import side_header


def _row(trial: str, node: str, lag_s: float, response_s: float, **extra: str) -> dict[str, str]:
    return {
        "trial_id": trial,
        "attempt": "1",
        "node": node,
        "label": f"{node} (pi@10.0.0.{node[-1]}:22)",
        "metered": "1" if node == "client1" else "0",
        "status": "ok",
        "share": "16",
        "start_lag_s": str(lag_s),
        "clock_uncertainty_ns": "200000",
        "response_s": str(response_s),
        **extra,
    }


def test_a_start_is_late_past_the_fraction_of_the_trials_longest_response() -> None:
    # Trial t01's longest node response is 2 s: late means a lag above 0.1 s.
    rows = [
        _row("t01", "client1", 0.004, 2.0),
        _row("t01", "client2", 0.099, 1.9),
        _row("t01", "client3", 0.101, 1.5),
        _row("t02", "client1", 0.003, 2.0),
        _row("t02", "client2", 0.006, 2.0),
        _row("t02", "client3", -0.2, 2.0, status="failed"),  # early counts as much as late
    ]
    nodes = {n.node: n for n in node_starts(rows)}
    assert nodes["client1"].late == () and nodes["client1"].metered
    assert nodes["client2"].late == ()
    assert nodes["client3"].late == ("t01", "t02") and nodes["client3"].failed == 1
    assert nodes["client3"].lag_max_s == -0.2 and nodes["client2"].lag_median_s == 0.099
    assert nodes["client1"].shares == ("16",)


def test_the_section_warns_about_late_nodes_and_is_absent_for_one_client() -> None:
    assert report_blocks([]) == []
    rows = [_row("t01", "client1", 0.0, 1.0), _row("t01", "client2", 0.5, 1.0)]
    blocks = report_blocks(rows)
    assert blocks[0] == Heading("Client nodes")
    table = next(b for b in blocks if isinstance(b, Table))
    assert table.rows[0][0] == "client1 (pi@10.0.0.1:22) (metered)"
    assert table.rows[1][4:] == ("500.0", "500.0", "1")
    (warning,) = next(b for b in blocks if isinstance(b, Bullets)).items
    assert warning == "1 of 1 attempts: client2 (pi@10.0.0.2:22) started late (t01)"
    assert "## Client nodes" in to_markdown(blocks)


def test_the_side_table_is_read_as_the_sweep_writes_it(tmp_path: Path) -> None:
    header = side_header("api")
    assert read_side_table(tmp_path) == []  # one client node: no table
    (tmp_path / SIDE_TABLE).write_text(",".join(header) + "\n" + ",".join(["x"] * len(header)))
    (row,) = read_side_table(tmp_path)
    assert row["node"] == "x"
    (tmp_path / SIDE_TABLE).write_text("trial_id,node\nt01,client1\n")
    with pytest.raises(RunFormatError, match=rf"{SIDE_TABLE}: no column 'attempt'"):
        read_side_table(tmp_path)
