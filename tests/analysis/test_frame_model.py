"""The per-frame cost model: known costs come back with intervals that hold them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.frame_model import CPU, TERMS, Term, fit, summary_rows


def _trials(n: int = 60, seed: int = 3) -> tuple[pd.DataFrame, pd.Series]:
    """Trials over windows and update policies, so frames, updates and time vary apart."""
    rng = np.random.default_rng(seed)
    data = rng.integers(50, 3000, n).astype(float)
    updates = data * rng.choice([0.5, 1.0, 2.0], n)  # the WINDOW_UPDATE policy
    ms = 20 + 0.05 * data + rng.uniform(0, 50, n)
    table = pd.DataFrame(
        {
            "trial_id": [f"t{i}" for i in range(n)],
            "intercept": 1.0,
            "client_data_frames": data,
            "client_window_update_frames": updates,
            "kib": 6836.0,  # one page: the same in every trial
            "ms": ms,
        }
    )
    cpu_us = 9000 + 30 * data + 45 * updates + 2 * ms + rng.normal(0, 300, n)
    return table, pd.Series(cpu_us)


def test_known_costs_per_frame_are_recovered_within_their_intervals() -> None:
    table, y = _trials()
    result = fit(table["trial_id"], table, TERMS, y, confidence=0.9, group="g", response=CPU)
    assert result is not None
    found = {c.term.name: c for c in result.coefficients}
    truth = {"intercept": 9000, "client_data_frames": 30, "client_window_update_frames": 45}
    for name, value in truth.items():
        assert found[name].ci_low <= value <= found[name].ci_high, name
    assert found["client_window_update_frames"].estimate == pytest.approx(45, abs=2)
    assert result.left_out == (("kib", "the same in every trial"),)
    assert result.df == 60 - 4
    assert result.r2 > 0.99
    assert result.residuals["residual"].std() == pytest.approx(300, rel=0.25)


def test_a_term_the_others_determine_is_left_out_and_named() -> None:
    table, y = _trials()
    table["client_window_update_frames"] = 2 * table["client_data_frames"]  # the "half" policy
    result = fit(table["trial_id"], table, TERMS, y, confidence=0.9, group="g", response=CPU)
    assert result is not None
    (reason,) = [why for name, why in result.left_out if name == "client_window_update_frames"]
    assert reason.startswith("determined by the terms before it (they explain 1.000000")


def test_too_few_trials_give_no_fit_and_summary_rows_name_each_coefficient() -> None:
    table, y = _trials(n=3)
    terms = (*TERMS, Term("page_resource_count", "per resource"))
    table["page_resource_count"] = 8
    assert fit(table["trial_id"], table, terms, y, confidence=0.9, group="g", response=CPU) is None
    table, y = _trials()
    result = fit(table["trial_id"], table, TERMS, y, confidence=0.9, group="g", response=CPU)
    assert result is not None
    rows = summary_rows([result], ["initial_window_size"])
    assert list(rows["metric"])[:2] == [
        "frame_model:cpu_us:intercept",
        "frame_model:cpu_us:client_data_frames",
    ]
    assert rows["initial_window_size"].isna().all()
    assert (rows["n"] == 60).all()
