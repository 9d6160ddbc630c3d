"""What changes how a run's results read, one short line each, for the report's first screen.

Each line states what happened and names the report section that has the detail: a noisy or
drifting idle baseline, trials on a throttled, hot or busy node, client nodes that started late,
a modelled meter's energy straying from its model, a study finding or energy differences between
neighbouring points below the meter's floor, ok rows without their power trace, trials that
never succeeded, a torn trial table, samples the meter lost, trials with too many samples
clipped or lost (analysis.meter_flags), HTTP/3 set beside cleartext HTTP/2, settings in force
at other values than asked and the header-compression tables in force on each protocol
(analysis.settings_in_force). The sections compute
these; this module only gathers their one-line forms. Pure reads of a loaded run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from agent.protocols import PROTOCOLS, protocol_spec, protocols_where
from analysis.clients import brief as late_starts
from analysis.columns import WINDOW_AXIS
from analysis.conditions import brief as node_conditions
from analysis.differences import floor_caveats
from analysis.energy_report import idle_caveats, truth_caveats
from analysis.facts import emulated_core_fractions, ok_rows_without_trace
from analysis.load import Run
from analysis.meter_flags import meter_flags
from analysis.settings_in_force import header_table_lines, mismatch_lines
from analysis.study import HIGH_WINDOW, LOW_WINDOW, study_checks
from analysis.workloads.base import report_of

_SHOWN_IDS = 5


def _ids(trials: Sequence[str]) -> str:
    return ", ".join(trials[:_SHOWN_IDS]) + (", ..." if len(trials) > _SHOWN_IDS else "")


def _trial_caveats(run: Run) -> list[str]:
    lines = []
    missing = ok_rows_without_trace(run)
    if missing:
        lines.append(
            f"{len(missing)} of {len(run.ok)} ok rows have no power trace ({_ids(missing)}): "
            "their energy cannot be rechecked (Trials)."
        )
    never = sorted(set(run.failed["trial_id"]) - set(run.ok["trial_id"]))
    if never:
        lines.append(
            f"{len(never)} trials never succeeded ({_ids(never)}): their points have fewer "
            "results than planned (Trials)."
        )
    if run.torn_tail:
        lines.append("trials.csv ended in a torn line (a kill mid-write), cut off (Trials).")
    return lines


def _column_sum(ok: pd.DataFrame, column: str) -> float:
    if column not in ok:
        return 0.0
    total = float(pd.to_numeric(ok[column], errors="coerce").sum())
    return total if math.isfinite(total) else 0.0


def _meter_caveats(run: Run) -> list[str]:
    lost = _column_sum(run.ok, "samples_lost")
    errors = _column_sum(run.ok, "meter_crc_errors")
    gaps = _column_sum(run.ok, "meter_frame_gaps")
    if not (lost or errors or gaps):
        return []
    samples = _column_sum(run.ok, "samples")
    share = f" ({lost / (samples + lost) * 100:.2g} % of them)" if samples + lost > 0 else ""
    parts = [
        text
        for count, text in (
            (lost, f"lost {lost:.0f} samples{share}"),
            (errors, f"had {errors:.0f} CRC errors"),
            (gaps, f"had {gaps:.0f} frame gaps"),
        )
        if count
    ]
    return [f"The meter {' and '.join(parts)}: energy from fewer samples (Trials)."]


def _share(fraction: float) -> str:
    """How many samples a limit lets through: none, or a share."""
    return "samples" if fraction == 0 else f"more than {fraction * 100:g} % of their samples"


def _flag_caveats(run: Run) -> list[str]:
    flags = meter_flags(run)
    lines = []
    if flags.saturated:
        lines.append(
            f"{len(flags.saturated)} of {len(run.ok)} trials had "
            f"{_share(flags.max_saturated_fraction)} at the meter's full scale "
            f"({_ids(flags.saturated)}): their energy is a lower bound (Trials)."
        )
    if flags.lost:
        lines.append(
            f"{len(flags.lost)} of {len(run.ok)} trials lost {_share(flags.max_lost_fraction)} "
            f"({_ids(flags.lost)}): their energy is bridged across the gaps (Trials)."
        )
    return lines


def _protocol_caveats(run: Run) -> list[str]:
    """HTTP/3 is always encrypted: set beside cleartext h2c, it pays for TLS too."""
    if "protocol" not in run.ok:
        return []
    protocols = set(run.ok["protocol"].astype(str)) & set(PROTOCOLS)
    quic = [p for p in PROTOCOLS if p in protocols and protocol_spec(p).quic]
    cleartext = [p for p in PROTOCOLS if p in protocols and not protocol_spec(p).tls]
    if not quic or not cleartext:
        return []
    over_tls = protocols_where(quic=False, tls=True)[0]
    against = (
        f"compare {quic[0]} with {over_tls} (TLS) in this run"
        if over_tls in protocols
        else f"sweep {over_tls} (TLS)"
    )
    return [
        f"{quic[0]} is set beside {cleartext[0]}: HTTP/3 is always encrypted and "
        f"{cleartext[0]} never is, so the gap holds TLS's cost as well as the protocol's; "
        f"{against} for the protocol's own (Figures)."
    ]


def _finding_caveats(run: Run, summary: pd.DataFrame) -> list[str]:
    """A study finding that rests on a difference the meter cannot see; one line per finding
    however many series (an h2+h3 run's two would take the first screen's room twice)."""
    if report_of(run.workload).study is None or WINDOW_AXIS not in run.axes:
        return []
    checks = study_checks(summary, run.axes, run.confidence, emulated_core_fractions(run))
    floors: dict[str, dict[str, float]] = {}
    for check in checks:
        if check.resolvability is not None and check.resolvability.verdict == "below_meter_floor":
            floors.setdefault(check.finding, {})[check.series] = check.resolvability.floor_mj or 0.0
    lines = []
    for finding, per_series in floors.items():
        series = "; ".join(name for name in per_series if name)
        floor = f"{max(per_series.values()):.3g} mJ"
        lines.append(
            f"The finding '{finding}'{f' ({series})' if series else ''} rests on a difference "
            f"between {LOW_WINDOW} and {HIGH_WINDOW} below the meter's floor "
            f"({'up to ' if len(per_series) > 1 else ''}{floor}): no number of repetitions "
            "resolves it (Against the study's findings)."
        )
    return lines


def caveats(
    run: Run,
    *,
    client_nodes: Sequence[Mapping[str, str]] = (),
    truth: pd.DataFrame | None = None,
    summary: pd.DataFrame | None = None,
) -> list[str]:
    """Every warning, the meter's and the nodes' first. `client_nodes`: trial_clients.csv's rows;
    `truth`: the modelled meter's agreement table (`analysis.agreement.agreement`); `summary`:
    the per-point summary, whose energy differences are set against the meter's floor."""
    return [
        *idle_caveats(run),
        *truth_caveats(truth),
        *_meter_caveats(run),
        *_flag_caveats(run),
        *([] if summary is None else _finding_caveats(run, summary)),
        *([] if summary is None else floor_caveats(summary, run.axes)),
        *node_conditions(run.ok.to_dict("records")),
        *late_starts(client_nodes),
        *_trial_caveats(run),
        *_protocol_caveats(run),
        *mismatch_lines(run),
        *header_table_lines(run),
    ]
