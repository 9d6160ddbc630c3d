"""Trials whose meter clipped or lost too many samples are flagged (analysis.meter_flags): named
on the report's first screen (analysis.caveats) and in its Trials facts, a saturated trial's
energy as a lower bound; the limits are the run's config's, or their defaults for a run that
predates them; a run that predates `samples_saturated` says nothing of saturation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.caveats import caveats
from analysis.facts import trial_facts
from analysis.load import Run
from analysis.meter_flags import meter_flags


def _run(
    saturated: list[float] | None, lost: list[int], meter: dict[str, Any] | None = None
) -> Run:
    ok = pd.DataFrame(
        {
            "trial_id": [f"t{i}" for i in range(len(lost))],
            "initial_window_size": [4096] * len(lost),
            "samples": [1000.0] * len(lost),
            "samples_lost": [float(n) for n in lost],
        }
    )
    if saturated is not None:
        ok["samples_saturated"] = saturated
    failed = pd.DataFrame({"trial_id": [], "attempt": [], "error": []})
    manifest = {"config": {"meter": meter}} if meter is not None else {}
    return Run(Path("run"), manifest, ("initial_window_size",), ok, len(lost), failed)


def test_one_clipped_sample_flags_a_trial_by_default_and_reads_as_a_lower_bound() -> None:
    run = _run([0, 1, 0, 400], [0, 0, 0, 0], {})
    flags = meter_flags(run)
    assert (flags.saturated, flags.lost) == (("t1", "t3"), ())
    (line,) = [c for c in caveats(run) if "full scale" in c]
    assert line == (
        "2 of 4 trials had samples at the meter's full scale (t1, t3): their energy is a "
        "lower bound (Trials)."
    )
    facts = dict(trial_facts(run))
    assert facts["samples_saturated (sum)"] == "401"
    assert facts["trials over meter.max_saturated_fraction (energy a lower bound)"] == (
        "2 (t1, t3)"
    )
    assert facts["trials over meter.max_lost_fraction (energy bridged across gaps)"] == "none"


def test_the_configs_limits_judge_each_trial() -> None:
    meter = {"max_saturated_fraction": 0.05, "max_lost_fraction": 0.0}
    run = _run([10, 60, 0], [0, 0, 3], meter)
    assert (meter_flags(run).saturated, meter_flags(run).lost) == (("t1",), ("t2",))
    lines = caveats(run)
    assert "1 of 3 trials had more than 5 % of their samples at the meter's full scale (t1)" in (
        " ".join(lines)
    )
    assert "1 of 3 trials lost samples (t2): their energy is bridged across the gaps (Trials)." in (
        lines
    )


def test_a_run_without_the_limits_loses_up_to_one_percent_unflagged() -> None:
    run = _run([0, 0], [10, 11])  # 10 of 1010 is under 1 %, 11 of 1011 over
    assert meter_flags(run).lost == ("t1",)


def test_a_run_from_before_saturation_was_counted_says_nothing_of_it() -> None:
    run = _run(None, [0, 0])
    assert not [c for c in caveats(run) if "full scale" in c or "bridged" in c]
    names = [name for name, _ in trial_facts(run)]
    assert not [n for n in names if "saturated" in n or "max_lost_fraction" in n]
    empty = _run([np.nan, np.nan], [0, 0])  # the column in the header, never filled
    assert not meter_flags(empty).recorded_saturation
    assert not [n for n, _ in trial_facts(empty) if "saturated" in n]
