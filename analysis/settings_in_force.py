"""What was in force, not only asked: each setting that ran at another value than its point
asked (trials.csv `settings_mismatches`), and the header-compression tables in force on each
protocol (HPACK's default is a 4,096-byte dynamic table; QPACK's is none, though qh3 announces
65,536 bytes unless asked), a difference a comparison of HTTP/3 with HTTP/2 carries. The
report's Trials facts list both; its first screen warns of a mismatch and, for a run that sets
HTTP/3 beside HTTP/2, states the tables. Pure reads of a loaded run; a run recorded before
these columns has none of it."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from agent.protocols import PROTOCOLS, protocol_spec
from analysis.load import Run

_TABLES = (("client_header_table_bytes", "client"), ("server_header_table_bytes", "server"))


def _mismatches(run: Run) -> tuple[int, Counter[str]] | None:
    """How many ok trials had a mismatch, and each mismatch's trials; None for a run recorded
    before the columns or none of whose trials recorded an announcement (every cell empty)."""
    if "settings_mismatches" not in run.ok or not _observed(run.ok, "settings_mismatch"):
        return None
    # An empty cell reads as NaN: only text names a mismatch.
    notes = [note for note in run.ok["settings_mismatches"] if isinstance(note, str) and note]
    return len(notes), Counter(item for note in notes for item in note.split("; "))


def _observed(rows: pd.DataFrame, column: str) -> bool:
    return column in rows and bool(pd.to_numeric(rows[column], errors="coerce").notna().any())


def _named(counts: Counter[str]) -> str:
    return "; ".join(
        f"{item} in {n} trial{'' if n == 1 else 's'}" for item, n in sorted(counts.items())
    )


def _capacities(rows: pd.DataFrame, column: str) -> str:
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    if values.empty:
        return "not observed"
    return " or ".join(f"{int(v):,} B" for v in sorted(set(values)))


def _tables(run: Run) -> list[tuple[str, str]]:
    """Per protocol of the run's ok rows: its codec and each side's table in force."""
    columns = [(column, side) for column, side in _TABLES if column in run.ok]
    if "protocol" not in run.ok or not any(_observed(run.ok, c) for c, _ in columns):
        return []
    present = set(run.ok["protocol"].astype(str))
    tables = []
    for protocol in (p for p in PROTOCOLS if p in present):
        rows = run.ok[run.ok["protocol"].astype(str) == protocol]
        codec = "QPACK" if protocol_spec(protocol).quic else "HPACK"
        sides = ", ".join(f"{side}'s {_capacities(rows, column)}" for column, side in columns)
        tables.append((f"{protocol} {codec}", sides))
    return tables


def settings_facts(run: Run) -> list[tuple[str, str]]:
    """The Trials section's facts: the mismatches, and the header tables per protocol."""
    found = _mismatches(run)
    if found is None:
        return []
    facts = [("settings in force other than asked", _named(found[1]) or "none")]
    facts += [
        (f"header compression's dynamic tables in force, {name}", sides)
        for name, sides in _tables(run)
    ]
    return facts


def mismatch_lines(run: Run) -> list[str]:
    """One line naming each mismatch (setting, asked, in force, whose announcement) with how
    many of the run's ok trials ran with it."""
    found = _mismatches(run)
    if found is None or not found[0]:
        return []
    return [
        f"{found[0]} of {len(run.ok)} trials ran with a setting other than their point asked: "
        f"{_named(found[1])}. Their results belong to the value in force (Trials)."
    ]


def header_table_lines(run: Run) -> list[str]:
    """For a run with HTTP/3 and HTTP/2 trials: the dynamic tables in force on each."""
    tables = _tables(run)
    protocols = {protocol_spec(name.split()[0]).quic for name, _ in tables}
    if len(protocols) < 2:
        return []
    parts = "; ".join(f"{name} {sides}" for name, sides in tables)
    return [
        "Header compression's dynamic tables in force, each side's as it announced it (the "
        f"most its peer's encoder may use): {parts}. A comparison of the protocols carries "
        "any difference between them (Trials)."
    ]
