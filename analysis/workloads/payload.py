"""The payload workload's part of a run's report: energy per message (a trial's energy over the
messages it sent) summarised per point like every other metric, and the reference's figures,
latency, message size and (de)serialisation time against the dataset's size, one series per
encoding, plus energy per message."""

from __future__ import annotations

import pandas as pd

from analysis.figures import Source, figure_workload
from analysis.load import Run, workload_columns
from analysis.per_unit import PerUnitEnergy
from analysis.workloads.base import FigureEntry, Headline, WorkloadReport

KIND = "payload"
# Energy per message: the trial's energy over the messages it sent.
PER_MESSAGE = PerUnitEnergy(
    "payload_message_count",
    {
        "payload_energy_per_message_mj": "energy_mj",
        "payload_energy_above_idle_per_message_mj": "energy_above_idle_mj",
    },
)
FIGURES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "payload_latency",
        ("payload_latency_mean_s", "payload_latency_p50_s"),
        "Round trip per message (request sent to response end): mean and median against the "
        "dataset's size, one series per encoding, as the reference's latency figure.",
    ),
    (
        "payload_size",
        ("payload_request_body_bytes",),
        "Request body per message (DATA payload bytes; frame and header bytes are in "
        "summary.csv's frame columns), as the reference's message-size figure.",
    ),
    (
        "payload_codec_cpu",
        (
            "payload_client_serialise_cpu_s",
            "payload_server_deserialise_cpu_s",
            "payload_client_deserialise_cpu_s",
        ),
        "CPU time per message inside the codecs alone: the client's encoding, the server's "
        "decoding into values (reported by the server in each answer's headers), and the "
        "client's reading of the empty answer.",
    ),
    (
        "payload_energy",
        tuple(PER_MESSAGE.derived),
        "Client energy per message, total and above the idle baseline: the trial's energy "
        "divided by the messages it sent.",
    ),
)


def payload_figures(run: Run, _summary: pd.DataFrame, source: Source) -> list[FigureEntry]:
    """The reference's three figures and energy, for the columns this run has values for (in
    place of the generic figure of the workload's own metrics)."""
    present = set(workload_columns(run.manifest)) | set(PER_MESSAGE.derived)
    figures = []
    for stem, columns, caption in FIGURES:
        figure = figure_workload([source], KIND, [c for c in columns if c in present])
        if figure is not None:
            figures.append((stem, figure, caption))
    return figures


REPORT = WorkloadReport(
    headline=Headline(("payload_latency", "payload_size"), "payload_latency_mean_s"),
    per_unit=PER_MESSAGE,
    figures=payload_figures,
)
