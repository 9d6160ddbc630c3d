"""The idle power a run's power figure draws: the sweep's measured baseline, not a modelled
meter's model figure that comes earlier in the manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from analysis.facts import idle_power_mw
from analysis.load import Run


def _run(manifest: dict[str, Any]) -> Run:
    return Run(
        Path("/nowhere"), manifest, ("initial_window_size",), pd.DataFrame(), 0, pd.DataFrame()
    )


def test_the_measured_baseline_wins_over_a_model_s_idle_power() -> None:
    manifest = {"meter": {"model": {"idle_mw": 1200.0}}, "idle_baseline_mw": 1348.7}
    assert idle_power_mw(_run(manifest)) == 1348.7


def test_a_run_without_a_measured_baseline_takes_the_first_idle_power_it_names() -> None:
    assert idle_power_mw(_run({"meter": {"model": {"idle_mw": 1200.0}}})) == 1200.0
    assert idle_power_mw(_run({"idle_power_mw": 1190.0})) == 1190.0
    assert idle_power_mw(_run({"run_id": "x"})) is None
