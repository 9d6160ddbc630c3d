"""One trial's records from several client nodes merged into the one record a trials.csv row is
built from, and each node's own row of the side table (trial_clients.csv). Pure.

What is exact and what is not (node times are mapped onto the controller's clock through each
node's measured offset, so spans are exact within the two nodes' offset uncertainties):

- `response_s`: earliest start to latest end over the nodes, on the controller's clock; exact
  within the offsets' uncertainty.
- `cpu_s`, bytes and frames sent and received: sums; exact.
- `rss_peak_bytes`, `ttfb_s`: the largest node's (each node is its own machine); exact.
- `t_wall_*`, `t_mono_*`, `phases`, `flow_control`, `conditions`, `settings_announced`,
  `settings_received`: the metered node's (the first), whose energy window and its phases they
  give and whose CPU (and kernel work) the trials.csv `client_*` condition columns describe
  (every node's agent announces the point's settings).
- a workload field `*_count`, `*_bytes`, `*_errors`: sum; exact.
- `*_max_*` / `*_min_*`: largest / smallest; exact.
- `*_mean_*`: the mean weighted by the kind's count field (`WorkloadSpec.count_field`); exact.
- `*_sd_*`: the pooled sample sd from each node's count, mean and sample sd (with `*_mean_*`
  beside it); exact.
- `*_pNN_*` (percentiles): the count-weighted mean of the nodes' percentiles; approximate (the
  nodes' samples are not shipped), between the smallest and the largest node's.
- `*_per_s` (rates): sum; exact only when the nodes' spans coincide (they start together).

Any other workload field is left empty in the merged row (its per-node values are in the side
table).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.workloads import SPECS, ParamValue

_PERCENTILE = re.compile(r".*_p\d+(_|$).*")


@dataclass(frozen=True)
class NodeRun:
    """One client node's part of one trial: its share of the parameters, its clock against the
    controller's, and its record (None when the node gave none; `error` then says why)."""

    name: str
    label: str
    params: tuple[tuple[str, ParamValue], ...]
    offset_ns: int  # node wall clock minus the controller's
    uncertainty_ns: int
    record: Mapping[str, Any] | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.record is not None and bool(self.record.get("ok"))

    def failure(self) -> str:
        """Why this node's part failed, naming the node."""
        if self.error is not None:
            named = self.error.startswith(self.label)
            return self.error if named else f"{self.label}: {self.error}"
        reason = (self.record or {}).get("error") or "client agent reported a failure"
        return f"{self.label}: {reason}"

    def controller_ns(self, key: str) -> int | None:
        """A wall time of the record (`t_wall_start_ns`, `t_wall_end_ns`) on the controller's
        clock."""
        value = (self.record or {}).get(key)
        return None if not isinstance(value, int) else value - self.offset_ns


def rule_of(name: str) -> str:
    """How a workload field merges (the module's table): sum, max, min, mean, sd, percentile,
    rate, or none."""
    if _PERCENTILE.fullmatch(name):
        return "percentile"
    for marker, rule in (("_max", "max"), ("_min", "min"), ("_mean", "mean"), ("_sd", "sd")):
        if marker + "_" in name + "_":
            return rule
    if name.endswith("_per_s"):
        return "rate"
    if name.endswith(("_count", "_bytes", "_errors")) or name in ("requests", "errors"):
        return "sum"
    return "none"


def _numbers(metrics: Sequence[Mapping[str, Any]], name: str) -> list[float] | None:
    values = [m.get(name) for m in metrics]
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return numbers if len(numbers) == len(values) else None


def _weights(metrics: Sequence[Mapping[str, Any]], kind: str) -> list[float] | None:
    count = SPECS[kind].count_field if kind in SPECS else None
    return None if count is None else _numbers(metrics, count)


def pooled_sd(counts: Sequence[float], means: Sequence[float], sds: Sequence[float]) -> float:
    """The sample sd of the union of groups, from each group's count, mean and sample sd."""
    total = sum(counts)
    mean = sum(n * m for n, m in zip(counts, means, strict=True)) / total
    squares = sum(
        (n - 1) * s * s + n * (m - mean) ** 2 for n, m, s in zip(counts, means, sds, strict=True)
    )
    return math.sqrt(squares / (total - 1)) if total > 1 else 0.0


def _merge_field(name: str, metrics: Sequence[Mapping[str, Any]], kind: str) -> object:
    rule = rule_of(name)
    values = _numbers(metrics, name)
    if values is None or rule == "none":
        return None
    simple: dict[str, Callable[[list[float]], float]] = {"sum": sum, "rate": sum, "max": max,
                                                         "min": min}  # fmt: skip
    if rule in simple:
        merged = simple[rule](values)
        return int(merged) if all(isinstance(m.get(name), int) for m in metrics) else merged
    weights = _weights(metrics, kind)
    if weights is None or sum(weights) <= 0:
        return None
    if rule in ("mean", "percentile"):
        return sum(w * v for w, v in zip(weights, values, strict=True)) / sum(weights)
    means = _numbers(metrics, name.replace("_sd", "_mean"))
    return None if means is None else pooled_sd(weights, means, values)


def _counts(records: Sequence[Mapping[str, Any]], direction: str) -> dict[str, Any]:
    frames: dict[str, int] = {}
    total = 0
    for record in records:
        counts = record.get(direction) or {}
        total += int(counts.get("bytes", 0))
        for frame, count in (counts.get("frames") or {}).items():
            frames[frame] = frames.get(frame, 0) + int(count)
    return {"bytes": total, "frames": frames}


# The record's fields taken from the metered node alone.
_METERED_NODE_FIELDS = (
    "trial_id", "workload", "engine", "flow_control", "conditions", "settings_announced",
    "settings_received", "t_mono_start_ns", "t_mono_end_ns", "phases",
)  # fmt: skip


def merge(kind: str, runs: Sequence[NodeRun]) -> dict[str, Any]:
    """The merged client record of a trial every node ran to the end (`NodeRun.ok`); the first
    node is the metered one."""
    assert runs and all(run.ok for run in runs), "merge only complete trials"
    records = [run.record or {} for run in runs]
    first = records[0]
    starts = [run.controller_ns("t_wall_start_ns") for run in runs]
    ends = [run.controller_ns("t_wall_end_ns") for run in runs]
    known_starts = [t for t in starts if t is not None]
    known_ends = [t for t in ends if t is not None]
    complete = len(known_starts) == len(known_ends) == len(runs)
    span_s = (max(known_ends) - min(known_starts)) / 1e9 if complete else None
    metrics = [r.get("metrics") or {} for r in records]
    names = [field.name for field in SPECS[kind].fields] if kind in SPECS else []
    return {
        **{key: first.get(key) for key in _METERED_NODE_FIELDS},
        "ok": True,
        "error": None,
        "t_wall_start_ns": first.get("t_wall_start_ns"),
        "t_wall_end_ns": first.get("t_wall_end_ns"),
        "response_s": span_s,
        "ttfb_s": _largest(records, "ttfb_s"),
        "cpu_s": sum(float(r.get("cpu_s") or 0.0) for r in records),
        "rss_peak_bytes": _largest(records, "rss_peak_bytes"),
        "received": _counts(records, "received"),
        "sent": _counts(records, "sent"),
        "metrics": {name: _merge_field(name, metrics, kind) for name in names},
        "client_nodes": len(runs),
    }


def _largest(records: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values: list[float] = [r[key] for r in records if isinstance(r.get(key), int | float)]
    return max(values) if values else None


SIDE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("trial_id", "the trial (trials.csv)"),
    ("attempt", "the client group's count of this trial's attempts, from 1"),
    ("node", "the client node's name (nodes.clients: client1, client2, ... unless named)"),
    ("label", "how messages name the node: name (user@host:port)"),
    ("metered", "1 for the node the meter's client channel measures (the first), else 0"),
    ("status", "ok, or failed (then `error` says why)"),
    ("error", "one-line reason this node's part failed, empty when ok"),
    ("share", "this node's value of the spread parameter (empty: the workload is not divided)"),
    ("start_at_wall_ns", "the agreed start instant, on the controller's wall clock (ns)"),
    ("start_lag_s", "this node's trial start minus the agreed instant, on the controller's clock"),
    ("clock_offset_ns", "node wall clock minus the controller's, as measured at the sweep's start"),
    ("clock_uncertainty_ns", "bound of that offset"),
    ("response_s", "this node's connect start -> last byte"),
    ("ttfb_s", "this node's connect start -> first response headers"),
    ("cpu_s", "this node's client agent CPU time over its trial"),
    ("rss_peak_bytes", "this node's client agent peak resident set size"),
    ("bytes_received", "bytes this node received, frame headers included"),
    ("bytes_sent", "bytes this node sent, frame headers included"),
)
"""trial_clients.csv's columns before the workload's own (`<kind>_<field>`), with meanings."""


def side_header(kind: str) -> list[str]:
    fields = [f"{kind}_{field.name}" for field in SPECS[kind].fields] if kind in SPECS else []
    return [name for name, _ in SIDE_COLUMNS] + fields


def side_row(
    trial_id: str,
    attempt: int,
    run: NodeRun,
    *,
    kind: str,
    metered: bool,
    start_at_ns: int,
    spread_param: str | None,
) -> dict[str, object]:
    """One node's row of trial_clients.csv, kept whether or not its part (or the trial) failed."""
    record = run.record or {}
    start = run.controller_ns("t_wall_start_ns")
    row: dict[str, object] = {
        "trial_id": trial_id,
        "attempt": attempt,
        "node": run.name,
        "label": run.label,
        "metered": int(metered),
        "status": "ok" if run.ok else "failed",
        "error": "" if run.ok else run.failure(),
        "share": dict(run.params).get(spread_param, "") if spread_param else "",
        "start_at_wall_ns": start_at_ns,
        "start_lag_s": None if start is None else (start - start_at_ns) / 1e9,
        "clock_offset_ns": run.offset_ns,
        "clock_uncertainty_ns": run.uncertainty_ns,
        "response_s": record.get("response_s"),
        "ttfb_s": record.get("ttfb_s"),
        "cpu_s": record.get("cpu_s"),
        "rss_peak_bytes": record.get("rss_peak_bytes"),
        "bytes_received": (record.get("received") or {}).get("bytes"),
        "bytes_sent": (record.get("sent") or {}).get("bytes"),
    }
    metrics = record.get("metrics") or {}
    for name in side_header(kind)[len(SIDE_COLUMNS) :]:
        row[name] = metrics.get(name.removeprefix(f"{kind}_"))
    return row


def requests_sent(runs: Sequence[NodeRun]) -> int | None:
    """The requests the nodes sent in a trial (a HEADERS frame each), which the server's records
    of the trial add up to; None when a node's record does not count them."""
    total = 0
    for run in runs:
        frames = ((run.record or {}).get("sent") or {}).get("frames")
        if not isinstance(frames, Mapping) or not isinstance(frames.get("HEADERS"), int):
            return None
        total += frames["HEADERS"]
    return total


def merge_server(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The server's records of one trial as one. A trial the server saw in parts (a node's
    connection closed before another's opened, so the trial closed and opened again) has a
    record per part; the parts' windows do not overlap, so CPU times, requests and bytes add up
    exactly; the serve time spans the first part's start to the last part's end."""
    if len(records) == 1:
        return dict(records[0])
    first = records[0]
    start = min(int(r["t_wall_start_ns"]) for r in records)
    end = max(int(r["t_wall_end_ns"]) for r in records)
    serve_s = (end - start) / 1e9
    sums = {
        key: sum(r.get(key) or 0 for r in records)
        for key in ("requests", "responses_completed", "streams_reset", "cpu_user_s",
                    "cpu_sys_s", "cpu_s")
    }  # fmt: skip
    return {
        **first,
        **sums,
        "ok": all(bool(r.get("ok")) for r in records),
        "serve_s": serve_s,
        "cpu_pct": 100.0 * sums["cpu_s"] / serve_s if serve_s > 0 else None,
        "rss_peak_bytes": _largest(records, "rss_peak_bytes"),
        "rss_peak_is_trial": all(bool(r.get("rss_peak_is_trial")) for r in records),
        "sent": _frame_counts(records, "sent"),
        "received": _frame_counts(records, "received"),
        "t_wall_start_ns": start,
        "t_wall_end_ns": end,
        "t_mono_start_ns": min(int(r["t_mono_start_ns"]) for r in records),
        "t_mono_end_ns": max(int(r["t_mono_end_ns"]) for r in records),
        "overlapping_trials": sorted({t for r in records for t in r.get("overlapping_trials", ())}),
        "parts": len(records),
    }


def _frame_counts(records: Sequence[Mapping[str, Any]], direction: str) -> dict[str, Any]:
    merged = _counts(records, direction)
    frame_bytes: dict[str, int] = {}
    for record in records:
        for frame, count in ((record.get(direction) or {}).get("frame_bytes") or {}).items():
            frame_bytes[frame] = frame_bytes.get(frame, 0) + int(count)
    return {**merged, "frame_bytes": frame_bytes}
