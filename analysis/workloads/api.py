"""The api workload's report section: the reference's table (users down, one column per server
stack and data layer; throughput, latency sd, peak CPU, peak memory) from a run's ok trials,
each figure a mean with its confidence interval over the repetitions.

The reference (Node.js vs Java/Tomcat under JMeter) reported per user count: throughput
(req/s), the standard deviation of elapsed time, peak CPU and peak memory. Here a trial's
throughput and latency sd are the client's (api_throughput_rps, api_latency_sd_s), peak CPU
is the server's busiest 100 ms interval (server_cpu_peak_pct), memory the server's peak RSS,
and energy per request the client node's energy above idle over the trial's requests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from agent.engines import ENGINE_OF_UNNAMED_RUNS, RENAMED, engine_label, engine_names
from analysis.document import Block, Heading, Paragraph, Table
from analysis.figures import Source
from analysis.load import Run
from analysis.per_unit import PerUnitEnergy
from analysis.stats import Summary, summarize
from analysis.workloads.base import (
    FigureEntry,
    Headline,
    WorkloadReport,
    own_metrics_figures,
    per_unit_figure,
)

USERS = "users"
STACK = "server_engine"
LAYER = "data_layer"
LAYER_NAMES = {"sql": "plain SQL", "orm": "ORM (SQLAlchemy)"}
# (trials.csv column, how a cell shows it): the reference's four figures, then ours.
FIGURES: tuple[tuple[str, str], ...] = (
    ("api_throughput_rps", "{} req/s"),
    ("api_latency_sd_s", "sd {} ms"),
    ("server_cpu_peak_pct", "{} % CPU"),
    ("server_rss_peak_bytes", "{} MB"),
    ("api_energy_above_idle_per_request_mj", "{} mJ/req"),
)
# Energy per request: the metered client's energy over the requests its trial made.
PER_REQUEST = PerUnitEnergy(
    "api_requests",
    {
        "api_energy_per_request_mj": "energy_mj",
        "api_energy_above_idle_per_request_mj": "energy_above_idle_mj",
    },
)
_SCALE = {"api_latency_sd_s": 1000.0, "server_rss_peak_bytes": 1e-6}


def _config_value(run: Run, section: str, key: str) -> Any:
    config = run.config
    part = config.get(section) if isinstance(config, Mapping) else None
    if section == "nodes" and isinstance(part, Mapping):
        part = part.get("server")
    return part.get(key) if isinstance(part, Mapping) else None


def _frame(run: Run) -> pd.DataFrame:
    """The ok trials with a stack, a data layer and users on every row (swept or fixed)."""
    frame = PER_REQUEST.table(run)
    # A column the analysis does not know by name (server_cpu_peak_pct) may come in as text.
    for name in (name for name, _ in FIGURES):
        if name in frame:
            frame[name] = pd.to_numeric(frame[name], errors="coerce")
    if STACK not in frame:
        frame[STACK] = _config_value(run, "nodes", "engine") or ENGINE_OF_UNNAMED_RUNS
    for column, section in ((LAYER, "workload"), (USERS, "workload")):
        if column not in frame:
            frame[column] = _config_value(run, section, column)
    return frame


def _stack_names() -> dict[str, str]:
    """Each engine's name, former names first (runs recorded with them), -> its label."""
    names = [*RENAMED, *engine_names()]
    return {name: engine_label(name) for name in names}


def _rank(names: Mapping[str, str], value: str) -> tuple[int, str]:
    """Known values in the order the names list them, then any other alphabetically."""
    return (list(names).index(value), "") if value in names else (len(names), value)


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def cell(summary: Summary, template: str) -> str:
    """ "mean (low..high)" in the template's unit, or the mean alone for a single trial."""
    text = _number(summary.mean)
    if summary.n > 1 and math.isfinite(summary.half_width):
        text += f" ± {_number(summary.half_width)}"
    return template.format(text)


def _summaries(values: Iterable[float], confidence: float, scale: float) -> Summary:
    return summarize([v * scale for v in values if not math.isnan(v)], confidence)


def reference_table(run: Run) -> Table:
    frame = _frame(run)
    columns = sorted(
        {(str(s), str(d)) for s, d in zip(frame[STACK], frame[LAYER], strict=True)},
        key=lambda pair: (_rank(_stack_names(), pair[0]), _rank(LAYER_NAMES, pair[1])),
    )
    figures = [(name, template) for name, template in FIGURES if name in frame]
    rows = []
    for users in sorted(frame[USERS].unique()):
        row = [str(int(users))]
        for stack, layer in columns:
            trials = frame[
                (frame[USERS] == users) & (frame[STACK] == stack) & (frame[LAYER] == layer)
            ]
            if trials.empty:
                row.append("")
                continue
            parts = [
                cell(_summaries(trials[name], run.confidence, _SCALE.get(name, 1.0)), template)
                for name, template in figures
            ]
            row.append(f"{', '.join(parts)} (n {len(trials)})")
        rows.append(tuple(row))
    header = (
        "users",
        *(f"{_stack_names().get(s, s)}, {LAYER_NAMES.get(d, d)}" for s, d in columns),
    )
    return Table(header, tuple(rows), "mean ± CI half-width per cell")


def api_blocks(run: Run, _summary: pd.DataFrame | None = None) -> Sequence[Block]:
    """The section, for an api run; nothing when it has no ok trial."""
    if run.ok.empty:
        return []
    return [
        Heading("The reference's table"),
        Paragraph(
            "As the reference (a REST service on Node.js and Java/Tomcat under JMeter) "
            "reported it, per user count: throughput, the standard deviation of a request's "
            "elapsed time, the server's peak CPU (its busiest 100 ms, % of one core) and peak "
            "memory (RSS), then energy per request above idle on the metered client node; one "
            f"column per server stack and data layer. ± is the {run.confidence * 100:g} % "
            "Student-t half-width over the trials (repetitions) of each cell."
        ),
        reference_table(run),
    ]


def _figures(run: Run, summary: pd.DataFrame, source: Source) -> list[FigureEntry]:
    return own_metrics_figures(run, summary, source) + per_unit_figure(
        run,
        source,
        PER_REQUEST,
        "api_energy",
        "Client energy per request, total and above the idle baseline: the metered client's "
        "energy over the requests its trial made.",
    )


REPORT = WorkloadReport(
    headline=Headline(
        ("workload_api", "api_energy"),
        "api_throughput_rps",
        "api",
        draws=("api_throughput_rps", "api_latency_sd_s", "api_energy_above_idle_per_request_mj"),
        caption="The reference's measures per point: throughput, the standard deviation of a "
        "request's latency, and the metered client's energy per request above idle.",
    ),
    per_unit=PER_REQUEST,
    sections={"api": api_blocks},
    figures=_figures,
)
