"""Runs recorded once per session from the study model (tests/analysis/fake_run.py), and the
reports `h2iot report` writes for them; one small reported run per workload besides the page.
Tests that change a run work on a copy."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from analysis.load import load_run
from analysis.report import write_report
from controller.cli import main
from tests.analysis.fake_run import Model, record_run

# Per workload: the axis swept beside the window, and the config's workload parameters.
WORKLOAD_RUNS: dict[str, tuple[tuple[str, tuple[Any, ...]], dict[str, Any]]] = {
    "api": (("users", (4, 16)), {"data_layer": "sql"}),
    "payload": (("encoding", ("soap", "dime")), {}),
    "stream": (("payload_doubles", (8, 64)), {}),
    "blob": (("mode", ("sequential", "concurrent")), {}),
}


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    record_run(root / "study")
    # A second engine on a shaped link: slower, the same sweep, a measured RTT.
    record_run(
        root / "slow-link",
        model=Model(speed=0.7, per_window_s_b=4000),
        seed=3,
        link_rate_mbit=100,
        rtt_s=0.0004,
        name="slow-link",
    )
    return root


@pytest.fixture(scope="session")
def reported(runs_root: Path) -> tuple[Path, Path]:
    """Both runs after `h2iot report study slow-link`."""
    study, slow = runs_root / "study", runs_root / "slow-link"
    assert main(["report", str(study), str(slow)]) == 0
    return study, slow


@pytest.fixture
def run_copy(runs_root: Path, tmp_path: Path) -> Path:
    """A private copy of the study run, without a report, to break or extend."""
    copy = tmp_path / "study"
    shutil.copytree(runs_root / "study", copy, ignore=shutil.ignore_patterns("report"))
    return copy


@pytest.fixture(scope="session")
def workload_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Per workload of WORKLOAD_RUNS, a reported run: two windows, 3 repetitions, no traces."""
    root = tmp_path_factory.mktemp("workloads")
    runs = {}
    for workload, (axis, params) in WORKLOAD_RUNS.items():
        run_dir = record_run(
            root / workload,
            windows=(4096, 65535),
            extra_axis=axis,
            repetitions=3,
            power=False,
            workload=workload,
            workload_params=params,
        )
        write_report(load_run(run_dir))
        runs[workload] = run_dir
    return runs
