"""What each workload's report leads with: its headline figure and the section stating its main
result (the findings), then the other result sections.

One row per workload kind (HEADLINES): the figures that can head its report, in order of
preference (the first one the report drew leads); the result section that states its main
result, when the run has what that section needs (the study comparison needs the window axis);
the metric whose table stands in when it has none; and, where the workload's own figures hold
too many panels to read on a first screen, the columns of a figure drawn for it (HEADLINE_STEM),
which then leads. A breakdown search's table leads any
search run, whatever its workload. A kind not listed gets the study's Figure 1 and the client
response time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from analysis.api import api_blocks
from analysis.breakdown import breakdown_blocks
from analysis.columns import WINDOW_AXIS
from analysis.document import Block, Bullets, Heading, Paragraph
from analysis.facts import emulated_core_fractions, node_hardware
from analysis.load import Run
from analysis.points import metric_rows
from analysis.study import MAGNITUDE_FACTOR, SETTLE_TOLERANCE, study_checks
from analysis.tables import check_table, metric_table

Section = Callable[[Run, pd.DataFrame], Sequence[Block]]


def study_blocks(run: Run, summary: pd.DataFrame) -> list[Block]:
    """The comparison with the study's findings, which are about its page fetch: the verdicts
    first, then what the nodes were and how the verdicts are reached."""
    if run.workload != "page":
        return [
            Heading("Against the study's findings"),
            Paragraph(
                f"Not compared: the study measured the page workload, this run the "
                f"{run.workload} workload."
            ),
            Paragraph("What the nodes of this run were:"),
            Bullets(tuple(node_hardware(run))),
        ]
    checks = study_checks(summary, run.axes, run.confidence, emulated_core_fractions(run))
    return [
        Heading("Against the study's findings"),
        check_table(checks),
        Paragraph("What the nodes of this run were (the study's: two Raspberry Pi 3B):"),
        Bullets(tuple(node_hardware(run))),
        Paragraph(
            "The verdicts judge shape and direction, and the size of the effects the study "
            f"quantified. Knee: the smallest window from which every mean stays within "
            f"{SETTLE_TOLERANCE * 100:g} % of the mean at the largest window. An increase's CI "
            "comes from the delta method on the log of the ratio of the two means, with "
            "Student's t at Welch-Satterthwaite degrees of freedom (df in the text). Its "
            "verdict: 'agrees' when the CI excludes zero on the study's side and holds the "
            f"study's effect (or the run's is within {MAGNITUDE_FACTOR:g}x of it); 'same "
            "direction' when it excludes zero there but the effect is a different size (how "
            "many times the study's, in the text); 'inconclusive' when it holds both zero and "
            "the study's effect; 'differs' otherwise. Absolute values (energy, server times) "
            "depend on the hardware: they are shown side by side, not judged."
        ),
    ]


def _breakdown(run: Run, _summary: pd.DataFrame) -> Sequence[Block]:
    return breakdown_blocks(run.path, run.manifest)


def _api(run: Run, _summary: pd.DataFrame) -> Sequence[Block]:
    return api_blocks(run)


# The report's result sections, in the order they follow its first screen.
SECTIONS: Mapping[str, Section] = {
    "breakdown": _breakdown,
    "study": study_blocks,
    "api": _api,
}


HEADLINE_STEM = "headline"


@dataclass(frozen=True)
class Headline:
    figures: tuple[str, ...]  # figure stems, most telling first
    metric: str  # its table leads when `section` does not
    section: str | None = None  # a key of SECTIONS
    needs_axes: tuple[str, ...] = ()  # what `section` needs of the run to state a result
    # Columns of a figure of their own (HEADLINE_STEM), drawn where the workload's other
    # figures hold too many panels to read on the first screen; it leads when drawn.
    draws: tuple[str, ...] = ()
    caption: str = ""


HEADLINES: Mapping[str, Headline] = {
    "page": Headline(("figure1_client",), "client_response_s", "study", (WINDOW_AXIS,)),
    "api": Headline(
        ("workload_api", "api_energy"),
        "api_throughput_rps",
        "api",
        draws=("api_throughput_rps", "api_latency_sd_s", "api_energy_above_idle_per_request_mj"),
        caption="The reference's measures per point: throughput, the standard deviation of a "
        "request's latency, and the metered client's energy per request above idle.",
    ),
    "payload": Headline(("payload_latency", "payload_size"), "payload_latency_mean_s"),
    "stream": Headline(("stream_received_rate", "workload_stream"), "stream_received_rate_hz"),
    "blob": Headline(
        ("workload_blob",),
        "blob_latency_mean_s",
        draws=("blob_latency_mean_s", "blob_latency_max_s"),
        caption="Latency per request (request sent to last byte), mean and largest per trial.",
    ),
}
DEFAULT = Headline(("figure1_client",), "client_response_s")


def headline_of(run: Run) -> Headline:
    return HEADLINES.get(run.workload, DEFAULT)


def headline_figure(run: Run, drawn: Sequence[str]) -> str | None:
    """The stem of the figure the report leads with, among those it drew."""
    wanted = (HEADLINE_STEM, *headline_of(run).figures, *DEFAULT.figures)
    return next((stem for stem in wanted if stem in drawn), drawn[0] if drawn else None)


def _metric_lead(run: Run, summary: pd.DataFrame, metric: str, target: float) -> list[Block]:
    if metric_rows(summary, metric).empty:
        metric = DEFAULT.metric
    # The table's caption names the metric.
    return [Heading("Main result"), metric_table(summary, run.axes, metric, target)]


def arrange(run: Run, summary: pd.DataFrame, target: float) -> tuple[list[Block], list[Block]]:
    """(the findings the report leads with, the other result sections in SECTIONS' order)."""
    made = {name: list(section(run, summary)) for name, section in SECTIONS.items()}
    headline = headline_of(run)
    own = headline.section if set(headline.needs_axes) <= set(run.axes) else None
    lead = next((name for name in ("breakdown", own) if name and made[name]), None)
    rest = [block for name, blocks in made.items() if name != lead for block in blocks]
    if lead is None:
        return _metric_lead(run, summary, headline.metric, target), rest
    return made[lead], rest
