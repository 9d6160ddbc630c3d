"""Several client nodes (trial_clients.csv, written with `nodes.clients`): per node, its attempts,
its share of the load, and whether it started with the others.

A node's part of a trial is a late start when its start lag (its start minus the agreed instant,
on the controller's clock) exceeds LATE_FRACTION of the trial's longest node response and the
node's clock-offset uncertainty: then the nodes' loads overlapped less than the trial assumes,
and its merged figures (throughput above all) describe fewer concurrent users than asked.

Pure: rows in (mappings of column -> cell, as the CSV holds them), findings out.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.conditions import cell_number
from analysis.document import Block, Bullets, Heading, Paragraph, Table
from analysis.errors import RunFormatError

SIDE_TABLE = "trial_clients.csv"
LATE_FRACTION = 0.05
REQUIRED = ("trial_id", "attempt", "node", "status", "start_lag_s", "response_s")

Row = Mapping[str, str]


def read_side_table(run_dir: Path) -> list[dict[str, str]]:
    """The run's trial_clients.csv rows; none when the run had one client node. A file without
    the columns this needs is a RunFormatError naming the file and the column."""
    path = run_dir / SIDE_TABLE
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
        if missing:
            raise RunFormatError(f"{path}: no column {missing[0]!r}")
        return list(reader)


@dataclass(frozen=True)
class NodeStarts:
    node: str
    label: str
    metered: bool
    attempts: int
    failed: int
    shares: tuple[str, ...]  # the distinct values of the spread parameter it ran
    lag_median_s: float | None
    lag_max_s: float | None
    late: tuple[str, ...]  # trial ids of its late starts


def _late(row: Row, longest_s: float | None) -> bool:
    lag = cell_number(row.get("start_lag_s"))
    if lag is None or longest_s is None:
        return False
    uncertainty_s = (cell_number(row.get("clock_uncertainty_ns")) or 0.0) / 1e9
    return abs(lag) > max(LATE_FRACTION * longest_s, uncertainty_s)


def node_starts(rows: Sequence[Row]) -> list[NodeStarts]:
    """One entry per node, in the order the table first names them."""
    longest: dict[tuple[str, str], float] = {}
    for row in rows:
        response = cell_number(row.get("response_s"))
        if response is not None:
            key = (row["trial_id"], row["attempt"])
            longest[key] = max(longest.get(key, 0.0), response)
    nodes: dict[str, list[Row]] = {}
    for row in rows:
        nodes.setdefault(row["node"], []).append(row)
    found = []
    for node, own in nodes.items():
        lags = sorted(lag for r in own if (lag := cell_number(r.get("start_lag_s"))) is not None)
        late = tuple(
            r["trial_id"] for r in own if _late(r, longest.get((r["trial_id"], r["attempt"])))
        )
        found.append(
            NodeStarts(
                node=node,
                label=own[0].get("label") or node,
                metered=own[0].get("metered") == "1",
                attempts=len(own),
                failed=sum(r["status"] != "ok" for r in own),
                shares=tuple(dict.fromkeys(r.get("share") or "" for r in own if r.get("share"))),
                lag_median_s=lags[len(lags) // 2] if lags else None,
                lag_max_s=max(lags, key=abs) if lags else None,
                late=late,
            )
        )
    return found


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.1f}"


def brief(rows: Sequence[Row]) -> list[str]:
    """One line per node that started late, for the report's first screen."""
    return [
        f"{n.label} started late in {len(n.late)} of {n.attempts} attempts: the nodes' loads "
        "overlapped less than planned (Client nodes)."
        for n in node_starts(rows)
        if n.late
    ]


def report_blocks(rows: Sequence[Row]) -> list[Block]:
    """The report's "Client nodes" section; nothing for a run with one client node."""
    nodes = node_starts(rows)
    if not nodes:
        return []
    table = Table(
        ("node", "attempts", "failed", "share", "start lag median (ms)", "largest (ms)", "late"),
        tuple(
            (
                f"{n.label}{' (metered)' if n.metered else ''}",
                str(n.attempts),
                str(n.failed),
                ", ".join(n.shares) or "whole",
                _ms(n.lag_median_s),
                _ms(n.lag_max_s),
                str(len(n.late)),
            )
            for n in nodes
        ),
        "start lag: the node's trial start minus the agreed instant, on the controller's clock",
    )
    blocks: list[Block] = [
        Heading("Client nodes"),
        Paragraph(
            "Each trial's load was spread over these nodes, started together at an agreed "
            f"instant. A late start: a lag above {LATE_FRACTION:.0%} of the trial's longest "
            "node response (and above the node's clock uncertainty)."
        ),
        table,
    ]
    late = [n for n in nodes if n.late]
    if late:
        blocks += [
            Paragraph("Warnings: in these trials the nodes' loads overlapped less than planned."),
            Bullets(
                tuple(
                    f"{len(n.late)} of {n.attempts} attempts: {n.label} started late "
                    f"({', '.join(n.late[:5])}{', ...' if len(n.late) > 5 else ''})"
                    for n in late
                )
            ),
        ]
    return blocks
