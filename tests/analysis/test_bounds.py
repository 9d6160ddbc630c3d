from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.bounds import bounds_of, rtt_estimate
from analysis.load import load_run


def test_rtt_from_the_manifest_or_bounded_by_the_fastest_ttfb(run_copy: Path) -> None:
    run = load_run(run_copy)
    estimate = rtt_estimate(run)
    assert estimate is not None
    assert estimate.rtt_s == pytest.approx(run.ok["client_ttfb_s"].min() / 2)
    assert "upper bound" in estimate.source
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["rtt_s"] = 0.0005
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    measured = rtt_estimate(load_run(run_copy))
    assert measured is not None and measured.rtt_s == 0.0005 and "measured" in measured.source


def test_flow_control_and_link_bounds(run_copy: Path) -> None:
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["rtt_s"] = 0.001
    manifest["config"]["link"]["rate_mbit"] = 100.0
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    bounds = bounds_of(load_run(run_copy))
    page = bounds.page_bytes
    assert page == 7_246_431
    # Connection window unset = the stream window: page x RTT / W.
    assert bounds.flow_control_s([256, 65535]) == pytest.approx(
        [page * 0.001 / 256, page * 0.001 / 65535]
    )
    assert bounds.link_s == pytest.approx(page * 8 / 100e6)
    assert "link bound" in bounds.caption() and "measured" in bounds.caption()
    manifest["config"]["workload"]["connection_window"] = 1_000_000
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    wide = bounds_of(load_run(run_copy))
    # A raised connection window lets S = 7 streams share it.
    assert wide.flow_control_s([256, 1_000_000]) == pytest.approx(
        [page * 0.001 / (7 * 256), page * 0.001 / 1_000_000]
    )


def test_no_rtt_no_flow_bound_and_unshaped_link(run_copy: Path) -> None:
    lines = (run_copy / "trials.csv").read_text().splitlines()
    header = lines[0].split(",")
    index = header.index("client_ttfb_s")
    blanked = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        cells[index] = ""
        blanked.append(",".join(cells))
    (run_copy / "trials.csv").write_text("\n".join(blanked) + "\n")
    bounds = bounds_of(load_run(run_copy))
    assert bounds.rtt is None and bounds.link_s is None
    assert "flow-control bound not drawn" in bounds.caption()
    assert "link unshaped" in bounds.caption()


def _set_column(run: Path, column: str, value: str) -> None:
    lines = (run / "trials.csv").read_text().splitlines()
    index = lines[0].split(",").index(column)
    out = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        cells[index] = value
        out.append(",".join(cells))
    (run / "trials.csv").write_text("\n".join(out) + "\n")


def test_an_upper_bound_rtt_is_tightened_by_the_measured_points(run_copy: Path) -> None:
    _set_column(run_copy, "client_ttfb_s", "1.0")  # a slow first byte: RTT <= 0.5 s says little
    run = load_run(run_copy)
    bounds = bounds_of(run)
    assert bounds.rtt is not None and bounds.consistent_rtt_s is not None
    assert bounds.rtt.rtt_s == bounds.consistent_rtt_s < 0.5
    assert "the largest RTT every measured point allows" in bounds.caption()
    # Then no point lies below the line, and one touches it.
    ok = run.ok
    line = bounds.flow_control_s(ok["initial_window_size"].to_numpy())
    gap = ok["client_response_s"].to_numpy() - line
    assert gap.min() == pytest.approx(0.0, abs=1e-12) and (gap >= -1e-12).all()
    assert not bounds.overshoots


def test_a_measured_rtt_that_overshoots_is_flagged(run_copy: Path) -> None:
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["rtt_s"] = 0.5
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    bounds = bounds_of(load_run(run_copy))
    assert bounds.rtt is not None and bounds.rtt.rtt_s == 0.5
    assert bounds.overshoots and "CAUTION" in bounds.caption()
