"""What a run says about itself: manifest facts, trial accounting, events, representative trials.

Pure reads of a loaded `Run`; the report renders them. The manifest beyond `config` is whatever
the recorder wrote (software versions, node and meter facts, clock offsets, the idle baseline), so
it is listed generically as dotted keys: instants as ISO 8601 in the run's zone
(`analysis.times`), and without the values that are zero by construction (a local node's clock
offsets against the controller, which is the same clock).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from agent.engines import ENGINE_OF_UNNAMED_RUNS
from analysis.columns import POWER_DIR, WINDOW_AXIS
from analysis.load import Run, read_events
from analysis.manifest import config_value
from analysis.meter_flags import meter_flags
from analysis.points import plain, x_axis_of
from analysis.settings_in_force import settings_facts
from analysis.times import Zone, created_ns, duration_text, iso, zone_of

_CONFIG_FACTS = (
    ("run name", "run.name"),
    ("repetitions per point (planned)", "run.repetitions"),
    ("order", "run.order"),
    ("seed", "run.seed"),
    ("page bytes (workload)", "workload.total_bytes"),
    ("connection window", "workload.connection_window"),
    ("WINDOW_UPDATE policy", "workload.window_update_policy"),
    ("client node", "nodes.client.host"),
    ("client CPU", "nodes.client.cpu"),
    ("server node", "nodes.server.host"),
    ("server CPU", "nodes.server.cpu"),
    ("meter source", "meter.source"),
    ("meter rate (Hz)", "meter.rate_hz"),
    ("meter sensor", "meter.sensor"),
    ("supply (V)", "meter.supply_v"),
    ("link rate (Mbit/s)", "link.rate_mbit"),
    ("link loss (%)", "link.loss_pct"),
    ("link delay (ms)", "link.delay_ms"),
)
_SKIP_TOP = ("config", "axes", "format_version")
_SHOWN_ELSEWHERE = ("created_wall_ns",)  # "created" in the run's facts
_EPOCH_NS_FLOOR = 10**17  # an instant since the epoch (after 1973), not a duration or offset
_MAX_VALUE_CHARS = 100
_MAX_OTHER_FACTS = 60


def text_of(value: Any) -> str:
    if value is None:
        return "unset"
    shown = value if isinstance(value, str) else json.dumps(value, default=str)
    return shown if len(shown) <= _MAX_VALUE_CHARS else shown[: _MAX_VALUE_CHARS - 3] + "..."


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, leaf value) pairs; lists stay whole."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def manifest_facts(run: Run) -> list[tuple[str, str]]:
    facts = [
        ("run folder", run.name),
        ("format version", text_of(run.manifest.get("format_version"))),
        ("workload", run.workload),
        ("swept", ", ".join(run.axes)),
    ]
    for axis in run.axes:
        values = sorted(plain(v) for v in run.ok[axis].unique()) if not run.ok.empty else []
        facts.append((f"{axis} (ok rows)", ", ".join(map(str, values))))
    facts.append(("confidence", f"{run.confidence:g}"))
    facts += time_facts(run)
    for label, dotted in _CONFIG_FACTS:
        value = config_value(run.manifest, dotted)
        if value is not None or dotted.startswith(("link.", "workload.connection")):
            facts.append((label, text_of(value)))
    return facts


EMULATION_CAVEAT = (
    "An emulated node is slowed by a CPU quota: it does a Pi's work per second, but in bursts at "
    "its host's full speed, so each flow-control round trip inside a burst is as fast as on the "
    "host. Without a link delay standing in for a Pi's latency per round trip, expect "
    "response-time findings far below the study's (configs/README.md, 'What the emulation "
    "reproduces')."
)


def delayed_caveat(delay_ms: float, method: str) -> str:
    """The caveat for an emulated run whose link adds a delay."""
    by = "a relay between the nodes' namespaces" if method == "relay" else "netem"
    return (
        "An emulated node is slowed by a CPU quota: it does a Pi's work per second, in bursts at "
        f"its host's full speed. The link's {delay_ms:g} ms each way (added by {by}) stands in "
        "for the latency per round trip that a Pi has and a quota does not give "
        "(configs/README.md, 'What the emulation reproduces')."
    )


def _emulated_nodes(run: Run) -> Mapping[str, Any]:
    """The manifest's `device.nodes`: per emulated role, its profile as applied and measured."""
    device = run.manifest.get("device")
    nodes = device.get("nodes") if isinstance(device, Mapping) else None
    return nodes if isinstance(nodes, Mapping) else {}


def emulated_core_fractions(run: Run) -> dict[str, float]:
    """Per emulated node (role), its CPU quota: the share of its host's core that stands for one
    core of the emulated device."""
    return {
        role: float(found["cpu_quota"])
        for role, found in _emulated_nodes(run).items()
        if isinstance(found, Mapping) and isinstance(found.get("cpu_quota"), int | float)
    }


def node_hardware(run: Run) -> list[str]:
    """What each node ran on, one line per role, then the emulation caveat if a node was
    emulated: the context the study comparison needs (the study ran two Pi 3B)."""
    emulated = _emulated_nodes(run)
    lines = []
    for role in ("client", "server"):
        host = config_value(run.manifest, f"nodes.{role}.host") or "local"
        engine = config_value(run.manifest, f"nodes.{role}.engine") or ENGINE_OF_UNNAMED_RUNS
        found = emulated.get(role)
        if isinstance(found, Mapping):
            where = found.get("host", "local")
            where = "this machine" if where == "local" else where
            speed = found.get("measured_speed_fraction")
            measured = "" if speed is None else f", measured at {speed:.3f} of its host's core"
            memory = found.get("memory_mib")
            limit = "" if memory is None else f", {memory} MiB"
            lines.append(
                f"{role} ({engine}): emulated {found.get('profile', 'custom')} on {where}: CPU "
                f"quota {_short(found.get('cpu_quota'))} of a core{measured} (aimed at "
                f"{_short(found.get('speed_fraction'))}){limit}"
            )
        elif host == "local":
            lines.append(
                f"{role} ({engine}): this machine's own core, unthrottled (far faster than the "
                "study's Pi 3B)"
            )
        else:
            lines.append(f"{role} ({engine}): {host}'s own hardware")
    if emulated:
        delay_ms = config_value(run.manifest, "link.delay_ms") or 0
        method = config_value(run.manifest, "link.delay_method") or "netem"
        lines.append(delayed_caveat(delay_ms, method) if delay_ms > 0 else EMULATION_CAVEAT)
    return lines


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else text_of(value)


def time_facts(run: Run) -> list[tuple[str, str]]:
    """When the run was made and when its trials ran, in the run's zone (and which it is)."""
    zone = zone_of(run.manifest, run.name)
    facts = [("times in", zone.describe())]
    created = created_ns(run.manifest)
    if created is not None:
        facts.append(("created", iso(created, zone)))
    span = trial_span_ns(run)
    if span is not None:
        start, end = span
        facts.append(
            (
                "trials ran",
                f"{iso(start, zone)} to {iso(end, zone)} ({duration_text((end - start) / 1e9)})",
            )
        )
    return facts


def trial_span_ns(run: Run) -> tuple[float, float] | None:
    """The first ok trial's start and the last one's end, wall-clock ns; None when unrecorded."""
    if run.ok.empty or not {"t_wall_start_ns", "t_wall_end_ns"} <= set(run.ok):
        return None
    start, end = run.ok["t_wall_start_ns"].min(), run.ok["t_wall_end_ns"].max()
    if not (math.isfinite(start) and math.isfinite(end)):
        return None
    return float(start), float(end)


def _is_local(run: Run, node: str, facts: Any) -> bool:
    label = facts.get("label") if isinstance(facts, Mapping) else None
    host = config_value(run.manifest, f"nodes.{node}.host")
    return host == "local" or (isinstance(label, str) and label.endswith("(local)"))


def _all_zero(value: Any) -> bool:
    if isinstance(value, Mapping):
        return all(_all_zero(item) for item in value.values())
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 0


def _without_zero_clocks(run: Run, nodes: Any) -> Any:
    """The manifest's `nodes` without the clocks that are zero because the node is local (the
    controller's own clock): a local node's offsets, and the peer clock between two of them."""
    if not isinstance(nodes, Mapping):
        return nodes
    local = {name for name, facts in nodes.items() if _is_local(run, name, facts)}
    kept: dict[str, Any] = {}
    for name, facts in nodes.items():
        if name == "peer_clock" and {"client", "server"} <= local and _all_zero(facts):
            continue
        zero_clock = isinstance(facts, Mapping) and _all_zero(facts.get("clock", 1))
        if name in local and zero_clock:
            kept[name] = {k: v for k, v in facts.items() if k != "clock"}
        else:
            kept[name] = facts
    return kept


def _value_text(key: str, value: Any, zone: Zone) -> str:
    if (
        key.endswith("wall_ns")
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value >= _EPOCH_NS_FLOOR
    ):
        return iso(value, zone)
    return text_of(value)


def other_manifest_facts(run: Run) -> list[tuple[str, str]]:
    """Everything the manifest holds besides the config, as dotted keys (module doc)."""
    rest = {
        k: _without_zero_clocks(run, v) if k == "nodes" else v
        for k, v in run.manifest.items()
        if k not in _SKIP_TOP and k not in _SHOWN_ELSEWHERE
    }
    zone = zone_of(run.manifest, run.name)
    facts = [(key, _value_text(key, value, zone)) for key, value in flatten(rest)]
    if len(facts) > _MAX_OTHER_FACTS:
        dropped = len(facts) - _MAX_OTHER_FACTS
        facts = [*facts[:_MAX_OTHER_FACTS], ("...", f"{dropped} more keys in manifest.json")]
    return facts


def idle_power_mw(run: Run) -> float | None:
    """The idle baseline: the sweep's measured `idle_baseline_mw`; in a run without it, the
    first manifest key (outside config) naming idle power in mW. (A modelled meter's manifest
    also holds its model's idle power, `meter.model.idle_mw`, earlier in key order: a model's
    figure, not what was measured.)"""
    measured = run.manifest.get("idle_baseline_mw")
    if isinstance(measured, int | float) and not isinstance(measured, bool):
        return float(measured)
    for key, value in flatten({k: v for k, v in run.manifest.items() if k not in _SKIP_TOP}):
        last = key.rsplit(".", 1)[-1]
        if "idle" in last and last.endswith("_mw") and isinstance(value, int | float):
            return float(value)
    return None


def trial_facts(run: Run) -> list[tuple[str, str]]:
    ok = run.ok
    counts = ok.groupby(list(run.axes)).size() if not ok.empty else pd.Series(dtype=int)
    never = sorted(set(run.failed["trial_id"]) - set(ok["trial_id"]))
    facts = [
        ("attempts recorded", str(run.attempts)),
        ("ok rows (results)", str(len(ok))),
        ("failed attempts", str(len(run.failed))),
        ("trials that never succeeded", ", ".join(never) if never else "none"),
        (
            "ok rows per point",
            f"{counts.min()} .. {counts.max()}" if not counts.empty else "none",
        ),
        ("torn last line cut off", "yes" if run.torn_tail else "no"),
        ("ok rows without their power trace", _listed(ok_rows_without_trace(run))),
    ]
    flags = meter_flags(run)
    for column in (
        "samples",
        "samples_lost",
        *(("samples_saturated",) if flags.recorded_saturation else ()),
        "meter_crc_errors",
        "meter_frame_gaps",
    ):
        if column in ok:
            total = ok[column].sum()
            facts.append((f"{column} (sum)", f"{total:.0f}" if math.isfinite(total) else "n/a"))
    # A run from before saturation was counted (no samples_saturated) lists these only when
    # a trial is over its limit: its golden reports read as they did.
    if flags.recorded_saturation or flags.saturated:
        facts.append(
            (
                "trials over meter.max_saturated_fraction (energy a lower bound)",
                _listed(list(flags.saturated)),
            )
        )
    if flags.recorded_saturation or flags.lost:
        facts.append(
            (
                "trials over meter.max_lost_fraction (energy bridged across gaps)",
                _listed(list(flags.lost)),
            )
        )
    if "window_source" in ok:
        sources = Counter(str(v) for v in ok["window_source"] if v)
        facts.append(
            ("energy window source", ", ".join(f"{k}: {n}" for k, n in sorted(sources.items())))
        )
    facts += settings_facts(run)
    return facts


def ok_rows_without_trace(run: Run) -> list[str]:
    """Trials whose ok row has no `power/<trial>.npy`: a run recorded when the row was written
    before the trace, killed in between, or a trace deleted since. Their energy columns hold
    what the trace gave; the trace itself cannot be looked at."""
    power = run.path / POWER_DIR
    trials = dict.fromkeys(str(trial) for trial in run.ok["trial_id"])
    return [trial for trial in trials if not (power / f"{trial}.npy").exists()]


def _listed(trials: list[str], limit: int = 10) -> str:
    if not trials:
        return "none"
    shown = ", ".join(trials[:limit]) + (", ..." if len(trials) > limit else "")
    return f"{len(trials)} ({shown})"


def failure_reasons(run: Run, limit: int = 10) -> list[str]:
    reasons = Counter(str(e) or "(no reason recorded)" for e in run.failed["error"])
    return [f"{n} x {reason}" for reason, n in reasons.most_common(limit)]


def event_counts(run: Run) -> list[tuple[str, str]]:
    counts = Counter(event["event"] for event in read_events(run.path))
    return [(kind, str(n)) for kind, n in sorted(counts.items())]


def median_trial(rows: pd.DataFrame) -> pd.Series:
    """The row whose energy (else response time) is nearest the rows' median: a trial that
    stands for its point; the first row where neither was measured."""
    column = "energy_mj" if rows["energy_mj"].notna().any() else "client_response_s"
    measured = rows[column].to_numpy(dtype=np.float64)
    if np.isnan(measured).all():
        return rows.iloc[0]
    return rows.iloc[int(np.nanargmin(np.abs(measured - np.nanmedian(measured))))]


def representative_trials(run: Run, wanted: tuple[int, ...] = (4096,)) -> list[tuple[str, str]]:
    """(trial_id, title) for the smallest, the largest and the `wanted` windows: at each, the
    trial whose energy (else response time) is nearest the point's median."""
    ok = run.ok
    if ok.empty:
        return []
    x_axis = x_axis_of(ok, run.axes)
    others = [a for a in run.axes if a != x_axis]
    if others:
        first = ok[others].drop_duplicates().sort_values(others).iloc[0]
        ok = ok[(ok[others] == first).all(axis=1)]
    values = sorted(plain(v) for v in ok[x_axis].unique())
    chosen = [values[0]]
    if x_axis == WINDOW_AXIS:
        for target in wanted:
            nearest = min(values, key=lambda v: abs(math.log2(v / target)) if v > 0 else math.inf)
            chosen.append(nearest)
    chosen.append(values[-1])
    picks: list[tuple[str, str]] = []
    for value in dict.fromkeys(chosen):
        row = median_trial(ok[ok[x_axis] == value])
        energy = row["energy_mj"]
        detail = f", {energy:.0f} mJ" if math.isfinite(energy) else ""
        picks.append((str(row["trial_id"]), f"{x_axis} = {value}: {row['trial_id']}{detail}"))
    return picks
