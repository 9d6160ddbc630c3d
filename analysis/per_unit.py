"""Energy per unit of a workload's work (a message sent, an item received, a request answered):
each ok trial's energy over the units it counted, then summarised per point like every other
metric (mean, sd, CI, repetitions needed), so summary.csv and the figures carry it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from analysis.load import Run
from analysis.points import summarize_points


@dataclass(frozen=True)
class PerUnitEnergy:
    """`count`: the trials.csv column counting a trial's units; `derived`: each derived
    column's name -> the trial's energy column it divides (energy_mj, energy_above_idle_mj)."""

    count: str
    derived: Mapping[str, str]

    def table(self, run: Run) -> pd.DataFrame:
        """The ok trials with the derived columns added (a trial that counted no unit: NaN)."""
        table = run.ok.copy()
        if self.count not in table:
            return table
        units = pd.to_numeric(table[self.count], errors="coerce")
        units = units.where(units > 0)
        for name, energy in self.derived.items():
            if energy in table:
                table[name] = pd.to_numeric(table[energy], errors="coerce") / units
        return table

    def rows(self, run: Run) -> pd.DataFrame:
        """summary.csv rows for the derived columns this run has; empty when it has none."""
        table = self.table(run)
        names = [name for name in self.derived if name in table]
        if not names:
            return pd.DataFrame()
        workload = dict(run.manifest.get("workload") or {})
        workload["columns"] = [{"name": name} for name in names]
        derived = replace(run, ok=table, manifest={**run.manifest, "workload": workload})
        summary = summarize_points(derived)
        return summary[summary["metric"].isin(names)]
