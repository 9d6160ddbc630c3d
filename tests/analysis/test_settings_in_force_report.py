"""The report's first screen names each setting in force at another value than asked, with its
trials, and, for a run with HTTP/3 beside HTTP/2, the header-compression tables in force on
each (analysis.settings_in_force); a run recorded before the columns has neither line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.caveats import caveats
from analysis.load import Run
from analysis.settings_in_force import settings_facts

NGHTTP_WINDOW = (
    "initial_window_size 4096 asked, 4095 in force (client SETTINGS_INITIAL_WINDOW_SIZE)"
)


def _run(columns: dict[str, list[object]]) -> Run:
    ok = pd.DataFrame({"trial_id": [f"t{i}" for i in range(len(columns["protocol"]))], **columns})
    failed = pd.DataFrame({"trial_id": [], "attempt": [], "error": []})
    return Run(Path("run"), {}, ("protocol",), ok, len(ok), failed)


def test_each_mismatch_is_named_with_its_trials() -> None:
    other = "header_table_size 0 asked, 4096 in force (server SETTINGS_HEADER_TABLE_SIZE)"
    run = _run(
        {
            "protocol": ["h2c"] * 3,
            "settings_mismatch": [1, 1, 0],
            "settings_mismatches": [NGHTTP_WINDOW, f"{NGHTTP_WINDOW}; {other}", ""],
        }
    )
    (line,) = [c for c in caveats(run) if "other than their point asked" in c]
    assert line.startswith("2 of 3 trials ran with a setting other than their point asked: ")
    assert f"{NGHTTP_WINDOW} in 2 trials" in line
    assert f"{other} in 1 trial;" in line


def test_settings_in_force_as_asked_and_an_old_run_say_nothing() -> None:
    assert not [c for c in caveats(_run({"protocol": ["h2c"]})) if "in force" in c]
    as_asked = _run(
        {"protocol": ["h2c"], "settings_mismatch": [0], "settings_mismatches": [float("nan")]}
    )
    assert not [c for c in caveats(as_asked) if "in force" in c]


def test_a_run_with_h3_beside_h2_states_hpacks_and_qpacks_tables_in_force() -> None:
    run = _run(
        {
            "protocol": ["h2", "h2", "h3"],
            "client_header_table_bytes": [4096, 4096, 0],
            "server_header_table_bytes": [4096, 4096, float("nan")],
        }
    )
    (line,) = [c for c in caveats(run) if "Header compression" in c]
    assert "h2 HPACK client's 4,096 B, server's 4,096 B" in line
    assert "h3 QPACK client's 0 B, server's not observed" in line


def test_a_run_of_one_protocol_family_has_no_header_table_line() -> None:
    run = _run({"protocol": ["h2c", "h2"], "client_header_table_bytes": [4096, 4096]})
    assert not [c for c in caveats(run) if "Header compression" in c]


def test_the_trials_facts_list_the_mismatches_and_each_protocols_tables() -> None:
    run = _run(
        {
            "protocol": ["h2c", "h3"],
            "settings_mismatch": [1, 0],
            "settings_mismatches": [NGHTTP_WINDOW, float("nan")],
            "client_header_table_bytes": [4096, 65536],
            "server_header_table_bytes": [float("nan"), 65536],
        }
    )
    assert settings_facts(run) == [
        ("settings in force other than asked", f"{NGHTTP_WINDOW} in 1 trial"),
        ("header compression's dynamic tables in force, h2c HPACK",
         "client's 4,096 B, server's not observed"),
        ("header compression's dynamic tables in force, h3 QPACK",
         "client's 65,536 B, server's 65,536 B"),
    ]  # fmt: skip
    as_asked = _run(
        {"protocol": ["h2c"], "settings_mismatch": [0], "settings_mismatches": [float("nan")]}
    )
    assert settings_facts(as_asked) == [("settings in force other than asked", "none")]
    assert settings_facts(_run({"protocol": ["h2c"]})) == []
    # The columns, every cell empty (no trial recorded an announcement): nothing is claimed.
    unobserved = {"settings_mismatch": [float("nan")], "settings_mismatches": [float("nan")]}
    assert settings_facts(_run({"protocol": ["h2c"], **unobserved})) == []
