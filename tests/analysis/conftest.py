"""Runs recorded once per session from the study model (tests/analysis/fake_run.py), and the
reports `h2iot report` writes for them. Tests that change a run work on a copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from controller.cli import main
from tests.analysis.fake_run import Model, record_run


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
