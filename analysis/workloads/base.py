"""What a workload contributes to its run's report, as one record (`WorkloadReport`), and the
figures most workloads draw the same way.

The report's core (analysis.report, analysis.findings) asks `report_of` for the run's kind once
and uses only this record: its headline (which figure and section lead the first screen), the
energy-per-unit rows it adds to summary.csv, its result sections, its figures, and whether
Figures 1-2 carry the page's flow-control bounds. A kind the registry (analysis.workloads) names
no module for gets DEFAULT_REPORT: the study's Figure 1 and the client response time, the
generic figure of its own metrics.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd
from matplotlib.figure import Figure

from analysis.document import Block
from analysis.figures import Source, figure_workload
from analysis.load import Run, workload_columns
from analysis.per_unit import PerUnitEnergy
from analysis.workloads import REPORT_MODULES

Section = Callable[[Run, pd.DataFrame], Sequence[Block]]
FigureEntry = tuple[str, Figure, str]  # stem, figure, caption
Figures = Callable[[Run, pd.DataFrame, Source], list[FigureEntry]]

HEADLINE_STEM = "headline"


@dataclass(frozen=True)
class Headline:
    figures: tuple[str, ...]  # figure stems, most telling first
    metric: str  # its table leads when `section` does not
    section: str | None = None  # "study" or a key of the workload's sections
    needs_axes: tuple[str, ...] = ()  # what `section` needs of the run to state a result
    # Columns of a figure of their own (HEADLINE_STEM), drawn where the workload's other
    # figures hold too many panels to read on the first screen; it leads when drawn.
    draws: tuple[str, ...] = ()
    caption: str = ""
    # `section` itself compares the run's category series in the workload's own terms (the
    # periodic's h3 against h2 per report): it opens the findings, before the generic
    # comparison of every category axis (analysis.categories).
    before_comparisons: bool = False


DEFAULT_HEADLINE = Headline(("figure1_client",), "client_response_s")


def own_metrics_figures(run: Run, _summary: pd.DataFrame, source: Source) -> list[FigureEntry]:
    """One panel per trials.csv column the workload adds (`<kind>_*`), when it has any."""
    figure = figure_workload([source], run.workload, workload_columns(run.manifest))
    if figure is None:
        return []
    caption = (
        f"The {run.workload} workload's own metrics (trials.csv columns {run.workload}_*), "
        "per point."
    )
    return [(f"workload_{run.workload}", figure, caption)]


def per_unit_figure(
    run: Run, source: Source, per_unit: PerUnitEnergy, stem: str, caption: str
) -> list[FigureEntry]:
    """The energy-per-unit columns' panels (total and above idle), when the run has them."""
    figure = figure_workload([source], run.workload, list(per_unit.derived))
    return [] if figure is None else [(stem, figure, caption)]


@dataclass(frozen=True)
class WorkloadReport:
    """A workload's part of the report (module doc). `sections`: its own result sections, in
    order, after the breakdown search's and the study comparison; `study`: the comparison with
    the study's findings, which only the page workload can make (others get a paragraph saying
    why not); `figures`: its figures after the memory figure; `bounds`: Figures 1-2 draw the
    flow-control and link bounds (the page's window sweep)."""

    headline: Headline = DEFAULT_HEADLINE
    per_unit: PerUnitEnergy | None = None
    sections: Mapping[str, Section] = field(default_factory=lambda: MappingProxyType({}))
    study: Section | None = None
    figures: Figures = own_metrics_figures
    bounds: bool = False


DEFAULT_REPORT = WorkloadReport()


def report_of(kind: str) -> WorkloadReport:
    """kind's report part (loaded on first use: a report imports only its own workload's)."""
    module = REPORT_MODULES.get(kind)
    if module is None:
        return DEFAULT_REPORT
    report: WorkloadReport = importlib.import_module(module).REPORT
    return report
