"""The page workload's part of the report: the comparison with the study's findings (which are
about its page fetch, so only a page run is judged against them), Figure 1 and the client's
response time leading, and the flow-control and link bounds drawn on Figures 1-2."""

from __future__ import annotations

import pandas as pd

from analysis.columns import WINDOW_AXIS
from analysis.document import Block, Bullets, Heading, Paragraph
from analysis.facts import emulated_core_fractions, node_hardware
from analysis.load import Run
from analysis.study import MAGNITUDE_FACTOR, SETTLE_TOLERANCE, study_checks
from analysis.study_meter import DEFAULT_PHASES, MIN_TRACE_RATE_HZ, SKETCH, replay_run
from analysis.tables import check_table
from analysis.workloads.base import Headline, WorkloadReport


def study_blocks(run: Run, summary: pd.DataFrame) -> list[Block]:
    """The verdicts first, then what the nodes were and how the verdicts are reached."""
    checks = study_checks(
        summary, run.axes, run.confidence, emulated_core_fractions(run), replay_run(run)
    )
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
            "depend on the hardware: they are shown side by side, not judged. 'Resolvable' "
            "sets the difference between the two windows a finding compares against what this "
            "run could see: its minimum detectable difference (Welch, 80 % power, from the "
            "observed spread and n) and, for energy, the meter's floor (Meter floor), with the "
            "repetitions per point it would need, or that none would do."
        ),
        Paragraph(
            "The study's meter row replays the study's Arduino sketch (niclabs/h2tests, "
            "Diego Londoño/Medicion_corriente.ino) on each trial's power trace: the current at "
            "the trial's supply through an ACS712-5A into a 10-bit ADC, 100 reads averaged "
            "with the sketch's arithmetic (1023 for 1024, zero at 2.5 V), times 0.707 and "
            f"5 V, a reading every {SKETCH.period_s * 1e3:.1f} ms, its phase averaged over "
            f"{DEFAULT_PHASES} phases; the trial's energy is the mean of its readings times "
            f"its window (analysis/study_meter.py). It needs a trace at "
            f"{MIN_TRACE_RATE_HZ:g} Hz or more."
        ),
    ]


REPORT = WorkloadReport(
    headline=Headline(("figure1_client",), "client_response_s", "study", (WINDOW_AXIS,)),
    study=study_blocks,
    bounds=True,
)
