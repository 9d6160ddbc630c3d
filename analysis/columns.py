"""The run format's version and file names, and the trials.csv columns the analysis reads (run
format version 1, data/README.md).

The version and file names are defined here only: the controller's recorder writes a run with
them (the controller may import analysis, never the reverse). The columns are kept here rather
than imported from the controller, since analysis depends only on the files of a run; a test
checks these names against the recorder's header so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

FORMAT_VERSION = 2

MANIFEST = "manifest.json"
TRIALS = "trials.csv"
EVENTS = "events.jsonl"
POWER_DIR = "power"
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

FRAME_SOURCES = {
    "client_data_frames_per_byte": "client_data_frames",
    "client_window_update_frames_per_byte": "client_window_update_frames",
}
BYTES_RECEIVED = "client_bytes_received"

REQUIRED_COLUMNS: tuple[str, ...] = ("trial_id", "status", *(m.name for m in METRICS))

NUMERIC_COLUMNS: tuple[str, ...] = (
    "attempt",
    "order_index",
    "repetition",
    "t_wall_start_ns",
    "t_wall_end_ns",
    "client_response_s",
    "client_ttfb_s",
    "client_connect_s",
    "client_connect_cpu_s",
    "client_cpu_s",
    "client_cpu_pct",
    "client_process_s",
    "client_process_cpu_s",
    "client_rss_peak_bytes",
    "client_bytes_received",
    "client_bytes_sent",
    "client_interface_bytes",
    "client_interface_packets",
    "client_data_frames",
    "client_window_update_frames",
    "server_serve_s",
    "server_cpu_s",
    "server_cpu_pct",
    "server_rss_peak_bytes",
    "server_bytes_sent",
    "server_data_frames",
    "energy_mj",
    "energy_above_idle_mj",
    "mean_power_mw",
    "window_s",
    "samples",
    "samples_lost",
    "meter_crc_errors",
    "meter_frame_gaps",
)
"""Columns converted to numbers in ok rows when present (empty cells become NaN)."""

METRIC_BY_NAME = {m.name: m for m in (*METRICS, *FRAME_METRICS, *PROCESS_METRICS, *CONNECT_METRICS)}

# A column's unit, read from its name's ending (units in names: `latency_max_s`, `body_bytes`).
_UNIT_SUFFIXES = (
    ("_bytes", "B"),
    ("_mj", "mJ"),
    ("_mw", "mW"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_pct", "%"),
    ("_hz", "Hz"),
    ("_rps", "1/s"),
)


def unit_of(name: str) -> str:
    return next((unit for suffix, unit in _UNIT_SUFFIXES if name.endswith(suffix)), "")


def metric_of(name: str) -> Metric:
    """The metric a column is: one of the common ones, or a workload's own (labelled by its
    name, in the unit its name ends with)."""
    known = METRIC_BY_NAME.get(name)
    if known is not None:
        return known
    unit = unit_of(name)
    if unit == "B":
        return Metric(name, name.replace("_", " "), unit, "KiB", 1 / 2**10)
    return Metric(name, name.replace("_", " "), unit, unit, 1.0)
