"""Runs recorded once per session from the study model (tests/analysis/fake_run.py), and the
reports `h2iot report` writes for them; one small reported run per workload besides the page.
Tests that change a run work on a copy.

Once per session means once for all of a session's pytest-xdist workers: writing these reports
is mostly matplotlib's drawing (5-8 s per report, twice that under coverage), and each worker
that ran a module using them used to write them again."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
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


def _built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, built by the first of the session's workers that asks for it, under
    a lock the others wait on. Workers share the parent of their base temps, keyed here by the
    session's run id so that an earlier session's folder is never taken for this one's."""
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    shared = factory.getbasetemp().parent / f"shared-{session}" if session else None
    root = shared or factory.getbasetemp()
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


def _record_study_runs(root: Path) -> None:
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
    assert main(["report", str(root / "study"), str(root / "slow-link")]) == 0


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study's run and a slower one on a shaped link, both reported together."""
    return _built_once(tmp_path_factory, "runs", _record_study_runs)


@pytest.fixture(scope="session")
def reported(runs_root: Path) -> tuple[Path, Path]:
    """Both runs after `h2iot report study slow-link`."""
    return runs_root / "study", runs_root / "slow-link"


@pytest.fixture
def run_copy(runs_root: Path, tmp_path: Path) -> Path:
    """A private copy of the study run, without a report, to break or extend."""
    copy = tmp_path / "study"
    shutil.copytree(runs_root / "study", copy, ignore=shutil.ignore_patterns("report"))
    return copy


def _record_workload_runs(root: Path) -> None:
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


@pytest.fixture(scope="session")
def workload_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Per workload of WORKLOAD_RUNS, a reported run: two windows, 3 repetitions, no traces."""
    root = _built_once(tmp_path_factory, "workloads", _record_workload_runs)
    return {workload: root / workload for workload in WORKLOAD_RUNS}


def _record_protocols_run(root: Path) -> None:
    run_dir = record_run(
        root / "h2-h3",
        windows=(4096, 65535),
        extra_axis=("protocol", ("h2", "h3")),
        repetitions=3,
        name="h2-h3",
    )
    write_report(load_run(run_dir))


@pytest.fixture(scope="session")
def protocols_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Issue 36's run, reported: configs/h3.toml at windows 4096 and 65535, 3 repetitions
    (protocol h2 and h3)."""
    return _built_once(tmp_path_factory, "protocols", _record_protocols_run) / "h2-h3"
