"""The run format's version and file names, and the metrics the analysis reads from trials.csv
(run format version 2, data/README.md; the columns themselves: analysis.trial_columns).

The version and file names are defined here only: the controller's recorder writes a run with
them (the controller may import analysis, never the reverse).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.trial_columns import PHASES, label_of, unit_of

FORMAT_VERSION = 2

MANIFEST = "manifest.json"
TRIALS = "trials.csv"
EVENTS = "events.jsonl"
POWER_DIR = "power"
EVENTS_DIR = "events"  # each trial's event traces, with run.events (data/README.md)
BREAKDOWN = "breakdown.csv"  # a breakdown search's result (controller.sweep.search_run)
OPTIMIZE = "optimize.csv"  # an optimizing search's trace (controller.sweep.optimize_run)

WINDOW_AXIS = "initial_window_size"
"""The study's swept setting; figures put it (log2) on the x axis when the run sweeps it."""


@dataclass(frozen=True)
class Metric:
    name: str  # the trials.csv column (or a derived name)
    label: str  # what a reader sees
    unit: str  # the column's unit as recorded
    display_unit: str  # the unit tables and figures show
    scale: float  # display value = recorded value x scale


METRICS: tuple[Metric, ...] = (
    Metric("client_response_s", "client response time", "s", "s", 1.0),
    Metric("client_cpu_s", "client CPU time", "s", "s", 1.0),
    Metric("client_cpu_pct", "client CPU", "%", "%", 1.0),
    Metric("client_rss_peak_bytes", "client peak RSS", "B", "MiB", 1 / 2**20),
    Metric("energy_mj", "client energy", "mJ", "mJ", 1.0),
    Metric("energy_above_idle_mj", "client energy above idle", "mJ", "mJ", 1.0),
    Metric("server_serve_s", "server response (serve) time", "s", "s", 1.0),
    Metric("server_cpu_s", "server CPU time", "s", "s", 1.0),
    Metric("server_cpu_pct", "server CPU", "%", "%", 1.0),
    Metric("server_rss_peak_bytes", "server peak RSS", "B", "MiB", 1 / 2**20),
)
"""The metrics every report summarises, in the order of the study's figures."""

FRAME_METRICS: tuple[Metric, ...] = (
    Metric("client_data_frames_per_byte", "DATA frames received per byte", "1/B", "1/B", 1.0),
    Metric(
        "client_window_update_frames_per_byte",
        "WINDOW_UPDATE frames sent per byte",
        "1/B",
        "1/B",
        1.0,
    ),
)
"""Derived per trial: frame counts over client_bytes_received (explain the CPU cost)."""

PROCESS_METRICS: tuple[Metric, ...] = (
    Metric("client_process_s", "client trial process time", "s", "s", 1.0),
    Metric("client_process_cpu_s", "client trial process CPU time", "s", "s", 1.0),
)
"""What the client's trial cost beyond its fetch, where the node timed it (a local node's fresh
trial process, start-up included; a warm agent's handling of the trial): a run of each
`run.agent` compared (`h2iot report WARM FRESH`) shows the start-up a warm agent saves."""

CONNECT_METRICS: tuple[Metric, ...] = (
    Metric("client_connect_s", "client connection set-up", "s", "ms", 1e3),
    Metric("client_connect_cpu_s", "client connection set-up CPU time", "s", "ms", 1e3),
)
"""The connection's set-up, TCP and, for protocol h2, TLS's handshake (h2 engine): what TLS
costs per trial apart from what it costs per byte."""

PHASE_METRICS: tuple[Metric, ...] = tuple(
    metric
    for phase in PHASES
    for metric in (
        Metric(f"energy_{phase}_mj", f"client energy, {phase} phase", "mJ", "mJ", 1.0),
        Metric(
            f"energy_{phase}_above_idle_mj",
            f"client energy above idle, {phase} phase",
            "mJ",
            "mJ",
            1.0,
        ),
        Metric(f"phase_{phase}_s", f"{phase} phase", "s", "ms", 1e3),
    )
)
"""The trial window's phases (data/README.md, "A trial's phases"): their energies sum to
energy_mj, so a point's mean energy splits into what connecting, exchanging and closing cost."""

FRAME_SOURCES = {
    "client_data_frames_per_byte": "client_data_frames",
    "client_window_update_frames_per_byte": "client_window_update_frames",
}
BYTES_RECEIVED = "client_bytes_received"

REQUIRED_COLUMNS: tuple[str, ...] = ("trial_id", "status", *(m.name for m in METRICS))

METRIC_BY_NAME = {
    m.name: m
    for m in (*METRICS, *FRAME_METRICS, *PROCESS_METRICS, *CONNECT_METRICS, *PHASE_METRICS)
}


def metric_of(name: str) -> Metric:
    """The metric a column is: one of the common ones, or a workload's own (labelled by its
    name, in the unit its name ends with)."""
    known = METRIC_BY_NAME.get(name)
    if known is not None:
        return known
    unit = unit_of(name)
    if unit == "B":
        return Metric(name, label_of(name), unit, "KiB", 1 / 2**10)
    return Metric(name, label_of(name), unit, unit, 1.0)
