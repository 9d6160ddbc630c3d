"""What each workload's report leads with: its headline figure and the section stating its main
result (the findings), then the other result sections.

Each workload's `Headline` (analysis.workloads.base, declared in analysis/workloads/<kind>.py)
names the figures that can head its report, in order of preference (the first one the report
drew leads); the result section that states its main result, when the run has what that
section needs (the study comparison needs the window axis); the metric whose table stands in
when it has none; and, where the workload's own figures hold too many panels to read on a
first screen, the columns of a figure drawn for it (HEADLINE_STEM), which then leads. A
breakdown search's table, or an optimizing search's best settings, leads any search run,
whatever its workload. A run sweeping a category axis (protocol, encoding, ...) opens its
findings with the comparison of its series (analysis.categories), after the workload's own
section where that section is itself such a comparison in the workload's terms
(`Headline.before_comparisons`: the periodic's h3 against h2 per report).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from analysis.breakdown import breakdown_blocks
from analysis.categories import category_blocks
from analysis.document import Block, Bullets, Heading, Paragraph
from analysis.event_costs import EventFit, decomposition_blocks
from analysis.facts import node_hardware
from analysis.load import Run
from analysis.optimize import FIGURE_STEM as SEARCH_STEM
from analysis.optimize import optimize_blocks
from analysis.points import metric_rows
from analysis.tables import metric_table
from analysis.workloads.base import DEFAULT_HEADLINE, HEADLINE_STEM, Headline, Section, report_of


def not_compared_blocks(run: Run, _summary: pd.DataFrame) -> list[Block]:
    """The study comparison's place in a run whose workload has none: why, and the nodes."""
    return [
        Heading("Against the study's findings"),
        Paragraph(
            f"Not compared: the study measured the page workload, this run the "
            f"{run.workload} workload."
        ),
        Paragraph("What the nodes of this run were:"),
        Bullets(tuple(node_hardware(run))),
    ]


def _breakdown(run: Run, _summary: pd.DataFrame) -> Sequence[Block]:
    return breakdown_blocks(run.path, run.manifest)


def sections_of(run: Run, grid: Run | None = None) -> dict[str, Section]:
    """The report's result sections, in the order they follow its first screen: a search's
    (checked against `grid`, a grid run of the same space, when given), the study comparison,
    then the workload's own."""
    own = report_of(run.workload)

    def search(run: Run, _summary: pd.DataFrame) -> Sequence[Block]:
        return optimize_blocks(run, grid)

    return {
        "breakdown": _breakdown,
        "search": search,
        "study": own.study or not_compared_blocks,
        **own.sections,
    }


def headline_of(run: Run) -> Headline:
    return report_of(run.workload).headline


def headline_figure(run: Run, drawn: Sequence[str]) -> str | None:
    """The stem of the figure the report leads with, among those it drew."""
    wanted = (SEARCH_STEM, HEADLINE_STEM, *headline_of(run).figures, *DEFAULT_HEADLINE.figures)
    return next((stem for stem in wanted if stem in drawn), drawn[0] if drawn else None)


def _metric_lead(run: Run, summary: pd.DataFrame, metric: str, target: float) -> list[Block]:
    if metric_rows(summary, metric).empty:
        metric = DEFAULT_HEADLINE.metric
    # The table's caption names the metric.
    return [Heading("Main result"), metric_table(summary, run.axes, metric, target)]


def arrange(
    run: Run,
    summary: pd.DataFrame,
    target: float,
    grid: Run | None = None,
    event_fits: Sequence[EventFit] = (),
) -> tuple[list[Block], list[Block]]:
    """(the findings the report leads with, the other result sections in sections_of's order).
    A run sweeping a category axis was made to compare its series: that comparison opens the
    findings (analysis.categories), followed, with traces (`event_fits`), by its split by
    event class (analysis.event_costs)."""
    sections = sections_of(run, grid)
    made = {name: list(section(run, summary)) for name, section in sections.items()}
    headline = headline_of(run)
    own = headline.section if set(headline.needs_axes) <= set(run.axes) else None
    lead = next((name for name in ("breakdown", "search", own) if name and made[name]), None)
    rest = [block for name, blocks in made.items() if name != lead for block in blocks]
    compared = category_blocks(run, summary) + decomposition_blocks(run, summary, event_fits)
    if lead is None:
        return compared + _metric_lead(run, summary, headline.metric, target), rest
    if lead == own and headline.before_comparisons:
        return made[lead] + compared, rest
    return compared + made[lead], rest
