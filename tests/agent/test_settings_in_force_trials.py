"""Settings in force on real trials: the agent's h2c and h3 clients against its servers record
what each side announced (both ways) and nothing differs from the point at W = 65,535; nghttp
asked for 4,096 announces 4,095 (its -w takes 2^N - 1), which the trial's row flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.protocols.in_force import SettingsExchange, mismatches
from controller.sweep.rows import settings_cells
from tests.agent.h3_peers import Credentials, h3_server
from tests.agent.servers import agent_server, run_agent
from tests.conftest import require_tool

WINDOW = 65535


def _fetch(url: str, site: Path, *extra: str) -> dict[str, Any]:
    result = run_agent("fetch", url, "--json", "--manifest", str(site / "manifest.json"), *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    record: dict[str, Any] = json.loads(result.stdout)
    assert record["ok"], record["error"]
    return record


def _exchange(record: dict[str, Any]) -> SettingsExchange:
    return SettingsExchange(record["settings_announced"], record["settings_received"])


def test_an_h2c_trial_records_both_announcements_in_force_as_asked(
    site: Path, tmp_path: Path
) -> None:
    setting = f"initial_window_size={WINDOW}"
    with agent_server(
        site, tmp_path, "--setting", setting, "--setting", "header_table_size=0"
    ) as server:
        record = _fetch(server.url, site, "--setting", setting, "--trial-id", "h2c-in-force")
        served = server.wait_for_trials("h2c-in-force")["h2c-in-force"]
    # Each side received what the other announced.
    assert (served["settings_received"], served["settings_announced"]) == (
        record["settings_announced"], record["settings_received"],
    )  # fmt: skip
    announced, received = record["settings_announced"], record["settings_received"]
    assert announced["SETTINGS_INITIAL_WINDOW_SIZE"] == WINDOW
    assert announced["SETTINGS_HEADER_TABLE_SIZE"] == 4096  # HPACK's default, not asked
    assert received["SETTINGS_INITIAL_WINDOW_SIZE"] == WINDOW
    assert received["SETTINGS_HEADER_TABLE_SIZE"] == 0  # the server's, as it announced it
    assert mismatches("h2c", {"initial_window_size": WINDOW}, _exchange(record)) == ()
    cells = settings_cells("h2c", {"initial_window_size": WINDOW}, record)
    assert cells == {
        "settings_mismatch": 0,
        "settings_mismatches": "",
        "client_header_table_bytes": 4096,
        "server_header_table_bytes": 0,
    }


def test_an_h3_trial_records_transport_parameters_and_settings_both_ways(
    site: Path, tmp_path: Path, credentials: Credentials
) -> None:
    setting = f"initial_window_size={WINDOW}"
    with h3_server(site, tmp_path, credentials, "--setting", setting) as server:
        record = _fetch(
            f"https://127.0.0.1:{server.port}/", site, "--protocol", "h3", "--ca-file",
            str(credentials.ca), "--setting", setting, "--trial-id", "h3-in-force",
        )  # fmt: skip
        served = server.wait_for_trials("h3-in-force")["h3-in-force"]
    assert (served["settings_received"], served["settings_announced"]) == (
        record["settings_announced"], record["settings_received"],
    )  # fmt: skip
    announced, received = record["settings_announced"], record["settings_received"]
    assert announced["initial_max_stream_data_bidi_local"] == WINDOW
    assert received["initial_max_stream_data_bidi_remote"] == WINDOW
    for side in (announced, received):
        assert {"initial_max_data", "SETTINGS_QPACK_MAX_TABLE_CAPACITY"} <= set(side)
        assert "SETTINGS_QPACK_BLOCKED_STREAMS" in side
    cells = settings_cells("h3", {"initial_window_size": WINDOW}, record)
    assert (cells["settings_mismatch"], cells["settings_mismatches"]) == (0, "")
    # Not asked for one, qh3 announces its own QPACK table (HPACK's default is 4,096).
    assert cells["client_header_table_bytes"] == announced["SETTINGS_QPACK_MAX_TABLE_CAPACITY"]
    assert cells["server_header_table_bytes"] == received["SETTINGS_QPACK_MAX_TABLE_CAPACITY"]


def test_nghttp_asked_for_4096_announces_4095_and_the_row_says_so(
    site: Path, tmp_path: Path
) -> None:
    require_tool("nghttp")
    setting = "initial_window_size=4096"
    with agent_server(site, tmp_path, "--setting", setting) as server:
        record = _fetch(
            server.url, site, "--engine", "nghttp2", "--setting", setting, "--trial-id", "ng"
        )
        served = server.wait_for_trials("ng")["ng"]
    assert record["settings_announced"]["SETTINGS_INITIAL_WINDOW_SIZE"] == 4095
    assert record["settings_received"] is None  # nghttp without -v prints no SETTINGS
    # What the server received is what the record read from nghttp's argv (and RFC 9113's
    # defaults for what nghttp did not send).
    assert record["settings_announced"].items() <= served["settings_received"].items()
    asked = {"initial_window_size": 4096}
    cells = settings_cells("h2c", asked, record)
    assert cells["settings_mismatch"] == 1
    assert cells["settings_mismatches"] == (
        "initial_window_size 4096 asked, 4095 in force (client SETTINGS_INITIAL_WINDOW_SIZE)"
    )
    assert cells["server_header_table_bytes"] is None
    # The server's record of its own announcement stands in for what nghttp could not see.
    with_server = settings_cells("h2c", asked, record, served)
    assert with_server["settings_mismatches"] == cells["settings_mismatches"]
    assert with_server["server_header_table_bytes"] == 4096
