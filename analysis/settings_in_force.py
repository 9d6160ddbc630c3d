"""What was in force, not only asked, for the report's first screen: each setting that ran at
another value than its point asked (trials.csv `settings_mismatches`), and, for a run that sets
HTTP/3 beside HTTP/2, the header-compression tables in force on each (HPACK's default is a
4,096-byte dynamic table, QPACK's none, a difference the protocol comparison carries). Pure
reads of a loaded run; a run recorded before these columns has neither line."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from agent.protocols import PROTOCOLS, protocol_spec
from analysis.load import Run

_TABLES = (("client_header_table_bytes", "client"), ("server_header_table_bytes", "server"))


def mismatch_lines(run: Run) -> list[str]:
    """One line naming each mismatch (setting, asked, in force, whose announcement) with how
    many of the run's ok trials ran with it."""
    if "settings_mismatches" not in run.ok:
        return []
    # An empty cell reads as NaN: only text names a mismatch.
    notes = [note for note in run.ok["settings_mismatches"] if isinstance(note, str) and note]
    counts = Counter(item for note in notes for item in note.split("; "))
    if not counts:
        return []
    named = "; ".join(
        f"{item} in {n} trial{'' if n == 1 else 's'}" for item, n in sorted(counts.items())
    )
    return [
        f"{len(notes)} of {len(run.ok)} trials ran with a setting other than their point asked: "
        f"{named}. Their results belong to the value in force (Trials)."
    ]


def _capacities(rows: pd.DataFrame, column: str) -> str:
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    if values.empty:
        return "not observed"
    return " or ".join(f"{int(v):,} B" for v in sorted(set(values)))


def header_table_lines(run: Run) -> list[str]:
    """For a run with HTTP/3 and HTTP/2 trials: the dynamic tables in force on each."""
    columns = [(column, side) for column, side in _TABLES if column in run.ok]
    if "protocol" not in run.ok or not columns:
        return []
    protocols = [p for p in PROTOCOLS if p in set(run.ok["protocol"].astype(str))]
    if len({protocol_spec(p).quic for p in protocols}) < 2:
        return []
    parts = []
    for protocol in protocols:
        rows = run.ok[run.ok["protocol"].astype(str) == protocol]
        codec = "QPACK" if protocol_spec(protocol).quic else "HPACK"
        tables = ", ".join(f"{side}'s {_capacities(rows, column)}" for column, side in columns)
        parts.append(f"{protocol} {codec} {tables}")
    return [
        "Header compression's dynamic tables in force, each side's as it announced it (the "
        f"most its peer's encoder may use): {'; '.join(parts)}. A comparison of the protocols "
        "carries any difference between them (Trials)."
    ]
