"""The nodes' conditions per trial (the `<role>_cpu_freq_mhz` ... columns of trials.csv): which
trials ran throttled, hot, at a changed governor or clock, or beside a busy process.

A trial is flagged, per node, when
- throttled: the Raspberry Pi firmware's "now" bits (0-3: under-voltage, clock capped,
  throttled, soft temperature limit) were set, or a "since boot" bit (16-19) that the node's
  first trial of the run did not have (it happened during the run);
- hot: its hottest zone read at least HOT_C (the Pi 3B's firmware starts throttling at 80 C);
- governor changed: its governor is not the one most of the node's trials ran under;
- clock changed: its lowest clock is more than CLOCK_CHANGE_FRACTION away from the clock most
  of the node's trials ran at;
- busy: other processes took more than BUSY_PCT % of one core of the node's CPUs.

Pure: rows in (mappings of column -> cell, as trials.csv holds them), findings out. The
manifest's `conditions`, the report's warnings and their one-line forms for the report's first
screen (`brief`) are all made here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from analysis.document import Block, Bullets, Heading, Paragraph, Table
from analysis.trial_columns import CONDITION_FIELDS, CONDITION_ROLES

HOT_C = 80.0
BUSY_PCT = 10.0
CLOCK_CHANGE_FRACTION = 0.05
THROTTLED_NOW = 0xF
THROTTLED_SINCE_BOOT = 0xF0000

REASONS = ("throttled", "hot", "governor changed", "clock changed", "busy")

Row = Mapping[str, object]


def cell_number(cell: object) -> float | None:
    """A CSV cell as a number; None when it is empty, not a number, or NaN."""
    if cell is None or cell == "":
        return None
    try:
        value = float(str(cell))
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _flags(cell: object) -> int | None:
    if isinstance(cell, int):
        return cell
    if not isinstance(cell, str) or not cell:
        return None
    try:
        return int(cell, 0)
    except ValueError:
        return None


def _text(cell: object) -> str | None:
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return None
    text = str(cell)
    return text or None


@dataclass(frozen=True)
class NodeConditions:
    """One node's conditions over a run's trials."""

    role: str
    trials: int  # rows considered
    read: int  # rows with any condition read
    governors: Mapping[str, int]
    clock_mhz: tuple[float, float] | None  # lowest, highest
    usual_clock_mhz: float | None
    temp_max_c: float | None
    other_cpu_max_pct: float | None
    flagged: Mapping[str, tuple[str, ...]]  # reason -> trial ids
    missing: Mapping[str, str]  # field -> reason, as the node said

    def to_dict(self) -> dict[str, object]:
        return {
            "trials": self.trials,
            "trials_with_conditions": self.read,
            "governors": dict(self.governors),
            "cpu_freq_mhz_range": None if self.clock_mhz is None else list(self.clock_mhz),
            "usual_cpu_freq_mhz": self.usual_clock_mhz,
            "temp_max_c": self.temp_max_c,
            "other_cpu_max_pct": self.other_cpu_max_pct,
            "flagged": {reason: len(ids) for reason, ids in self.flagged.items()},
            "flagged_trials": {reason: list(ids) for reason, ids in self.flagged.items()},
            "unavailable": dict(self.missing),
        }


def node_conditions(rows: Sequence[Row], role: str) -> NodeConditions:
    """The node `role`'s conditions over `rows` (ok trials)."""
    columns = {field.name: f"{role}_{field.name}" for field in CONDITION_FIELDS}
    read = [row for row in rows if any(_text(row.get(c)) is not None for c in columns.values())]
    governors = Counter(g for row in read if (g := _text(row.get(columns["governor"]))) is not None)
    clocks = [c for row in read if (c := cell_number(row.get(columns["cpu_freq_mhz"]))) is not None]
    temps = [t for row in read if (t := cell_number(row.get(columns["temp_c"]))) is not None]
    others = [
        o for row in read if (o := cell_number(row.get(columns["other_cpu_pct"]))) is not None
    ]
    usual_governor = governors.most_common(1)[0][0] if governors else None
    usual_clock = Counter(clocks).most_common(1)[0][0] if clocks else None
    first_flags = next(
        (f for row in read if (f := _flags(row.get(columns["throttled_flags"]))) is not None), 0
    )
    flagged: dict[str, list[str]] = {reason: [] for reason in REASONS}
    for row in read:
        trial = str(row.get("trial_id", "?"))
        flags = _flags(row.get(columns["throttled_flags"]))
        if flags is not None and (
            flags & THROTTLED_NOW or flags & THROTTLED_SINCE_BOOT & ~first_flags
        ):
            flagged["throttled"].append(trial)
        temp = cell_number(row.get(columns["temp_c"]))
        if temp is not None and temp >= HOT_C:
            flagged["hot"].append(trial)
        governor = _text(row.get(columns["governor"]))
        if governor is not None and governor != usual_governor:
            flagged["governor changed"].append(trial)
        clock = cell_number(row.get(columns["cpu_freq_mhz"]))
        if (
            clock is not None
            and usual_clock
            and abs(clock - usual_clock) > CLOCK_CHANGE_FRACTION * usual_clock
        ):
            flagged["clock changed"].append(trial)
        other = cell_number(row.get(columns["other_cpu_pct"]))
        if other is not None and other > BUSY_PCT:
            flagged["busy"].append(trial)
    return NodeConditions(
        role=role,
        trials=len(rows),
        read=len(read),
        governors=dict(governors),
        clock_mhz=(min(clocks), max(clocks)) if clocks else None,
        usual_clock_mhz=usual_clock,
        temp_max_c=max(temps) if temps else None,
        other_cpu_max_pct=max(others) if others else None,
        flagged={reason: tuple(ids) for reason, ids in flagged.items() if ids},
        missing=_missing(read, role),
    )


def _missing(rows: Sequence[Row], role: str) -> dict[str, str]:
    """Each field the node could not read, with the reason it gave last."""
    reasons: dict[str, str] = {}
    for row in rows:
        text = _text(row.get(f"{role}_conditions_missing"))
        for part in (text or "").split("; "):
            name, _, why = part.partition(": ")
            if name and why:
                reasons[name] = why
    return reasons


def summarise(rows: Sequence[Row]) -> dict[str, object]:
    """The manifest's `conditions`: per node, what its trials ran under and what was flagged."""
    return {
        "thresholds": {
            "hot_c": HOT_C,
            "busy_other_cpu_pct": BUSY_PCT,
            "clock_change_fraction": CLOCK_CHANGE_FRACTION,
        },
        **{role: node_conditions(rows, role).to_dict() for role in CONDITION_ROLES},
    }


_REASON_TEXT = {
    "throttled": "ran throttled (Raspberry Pi firmware flags)",
    "hot": f"ran hot (at least {HOT_C:g} C)",
    "governor changed": "ran under another CPU governor than the rest",
    "clock changed": (
        f"ran at a CPU clock more than {CLOCK_CHANGE_FRACTION:.0%} from the node's usual one"
    ),
    "busy": f"ran beside other processes taking more than {BUSY_PCT:g} % of a core",
}
_BRIEF_TEXT = {
    **_REASON_TEXT,
    "governor changed": "ran under another CPU governor",
    "clock changed": f"ran over {CLOCK_CHANGE_FRACTION:.0%} off its usual CPU clock",
    "busy": f"was busy (other processes over {BUSY_PCT:g} % of a core)",
}


def warnings(rows: Sequence[Row]) -> list[str]:
    """One line per node and reason: how many trials, and the first few ids."""
    lines = []
    for role in CONDITION_ROLES:
        node = node_conditions(rows, role)
        for reason, ids in node.flagged.items():
            shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
            lines.append(
                f"{len(ids)} of {node.trials} trials: the {role} node {_REASON_TEXT[reason]} "
                f"({shown})"
            )
    return lines


def brief(rows: Sequence[Row]) -> list[str]:
    """The warnings without trial ids, one line per node and reason, naming the section."""
    lines = []
    for role in CONDITION_ROLES:
        node = node_conditions(rows, role)
        for reason, ids in node.flagged.items():
            lines.append(
                f"The {role} node {_BRIEF_TEXT[reason]} in {len(ids)} of {node.trials} trials "
                "(Node conditions)."
            )
    return lines


def report_blocks(rows: Sequence[Row]) -> list[Block]:
    """The report's "Node conditions" section; nothing for a run that did not record them."""
    nodes = [node_conditions(rows, role) for role in CONDITION_ROLES]
    if not any(node.read for node in nodes):
        return []
    found = warnings(rows)
    table = Table(
        ("node", "trials read", "governor", "CPU clock (MHz)", "hottest (C)", "others max (%)"),
        tuple(
            (
                node.role,
                f"{node.read} of {node.trials}",
                ", ".join(f"{g} ({n})" for g, n in node.governors.items()) or "unavailable",
                "unavailable"
                if node.clock_mhz is None
                else f"{node.clock_mhz[0]:g} to {node.clock_mhz[1]:g}",
                "unavailable" if node.temp_max_c is None else f"{node.temp_max_c:g}",
                "unavailable" if node.other_cpu_max_pct is None else f"{node.other_cpu_max_pct:g}",
            )
            for node in nodes
            if node.read
        ),
    )
    missing = [
        f"{node.role}: {name} unavailable ({why})"
        for node in nodes
        for name, why in node.missing.items()
    ]
    blocks: list[Block] = [Heading("Node conditions"), table]
    if found:
        blocks += [Paragraph("Warnings: these trials measured a node not in its usual state."),
                   Bullets(tuple(found))]  # fmt: skip
    else:
        blocks.append(Paragraph("No trial ran throttled, hot, at a changed governor or clock, "
                                "or beside a busy process."))  # fmt: skip
    if missing:
        blocks.append(Bullets(tuple(missing)))
    return blocks
