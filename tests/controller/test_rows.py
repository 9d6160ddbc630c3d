"""The row builder against the column declaration (analysis.trial_columns): a trial with every
part fills exactly the declared columns, and a copied cell is its source's value as it is."""

from __future__ import annotations

from typing import Any

import numpy as np

from agent.workloads import SPECS
from analysis.trial_columns import (
    BENCH_COLUMNS,
    CONDITION_FIELDS,
    KERNEL_FIELDS,
    LEADING_COLUMNS,
    METRIC_COLUMNS,
    QUIC_COLUMNS,
    SEARCH_COLUMNS,
    SOURCES,
    condition_columns,
    header,
    kernel_columns,
    workload_columns,
)
from controller.config.model import Config
from controller.energy import WindowEnergy
from controller.nodes.agent import TRIAL_PROCESS
from controller.sweep.agent_pair import TRIAL_INTERFACE
from controller.sweep.exchanges import ExchangeEnergy
from controller.sweep.interfaces import PowerWindow
from controller.sweep.phases import PhaseEnergy
from controller.sweep.plan import PlannedTrial
from controller.sweep.rows import trial_row

KIND = "blob"
AXES = ("initial_window_size",)
TRIAL = PlannedTrial(
    "g001p01r01", 4, 0, 1, Config().point((("initial_window_size", 4096),)), probe=(1, 1)
)
POWER = PowerWindow(np.zeros(3), np.zeros(3), 0.25, 0.75, "marker", 1, 2, 3, 4)
ENERGY = WindowEnergy(1.0, 0.5, 2.0, 0.5, 40)
PHASES = PhaseEnergy("marker", (0.1, 0.3, 0.1), (0.25, 0.5, 0.25), (0.15, 0.2, 0.15))


def _record(role: str) -> dict[str, Any]:
    """A node's trial record with every field the row reads."""
    conditions: dict[str, Any] = {field.name: 1 for field in CONDITION_FIELDS}
    conditions["unavailable"] = {"temp_c": "no thermal zone"}
    conditions["kernel"] = {field.name: 7 for field in KERNEL_FIELDS}
    record: dict[str, Any] = {
        "ok": True,
        "t_wall_start_ns": 1_000,
        "t_wall_end_ns": 2_000,
        "response_s": 0.5,
        "ttfb_s": 0.1,
        "connect_s": 0.01,
        "connect_cpu_s": 0.005,
        "tls_version": "TLSv1.3",
        "event_loop": "asyncio",
        "serve_s": 0.4,
        "cpu_s": 0.2,
        "cpu_pct": 50.0,
        "cpu_peak_pct": 90.0,
        "rss_peak_bytes": 1 << 20,
        "received": {"bytes": 10, "frames": {"DATA": 3, "datagrams": 4}},
        "sent": {"bytes": 5, "frames": {"DATA": 3, "WINDOW_UPDATE": 2}},
        "flow_control": {"initial_window_size": 4096},
        "conditions": conditions,
        "transport": {"packets_lost": 0, "pto_count": 0, "udp_rcvbuf_errors": 0},
    }
    if role == "client":
        record[TRIAL_INTERFACE] = {"bytes": 100, "packets": 2}
        record[TRIAL_PROCESS] = {"t_mono_start_ns": 0, "t_mono_end_ns": 10**9, "cpu_s": 0.3}
        record["metrics"] = {field.name: 1 for field in SPECS[KIND].fields}
        # The point asks a 4096-byte window; the client's stack announced 4095 (nghttp's -w 12).
        record["settings_announced"] = {
            "SETTINGS_INITIAL_WINDOW_SIZE": 4095, "SETTINGS_HEADER_TABLE_SIZE": 4096,
        }  # fmt: skip
        record["settings_received"] = {
            "SETTINGS_INITIAL_WINDOW_SIZE": 4096, "SETTINGS_HEADER_TABLE_SIZE": 0,
        }  # fmt: skip
    return record


def test_the_copied_columns_are_the_ones_every_row_has_and_name_a_part_of_the_trial() -> None:
    for column in SEARCH_COLUMNS + BENCH_COLUMNS + QUIC_COLUMNS + workload_columns(KIND):
        assert not column.source, column.name
    for column in condition_columns() + kernel_columns():
        assert not column.source, column.name
    for column in LEADING_COLUMNS + METRIC_COLUMNS:
        if column.source:
            part, _, name = column.source.partition(".")
            assert part in SOURCES and name, column


def test_a_trial_with_every_part_fills_every_declared_column() -> None:
    client, server = _record("client"), _record("server")
    row = trial_row(
        TRIAL,
        2,
        error=None,
        client=client,
        server=server,
        power=POWER,
        energy=ENERGY,
        workload=KIND,
        bench="b1",
        phases=PHASES,
    )
    assert set(row) == set(header(AXES, KIND, True, True, bench=True))
    assert (row["phase_clock"], row["phase_exchange_s"], row["energy_close_mj"]) == (
        "marker",
        0.3,
        0.25,
    )
    assert row["energy_exchange_above_idle_mj"] == 0.2
    assert (row["trial_id"], row["order_index"], row["repetition"]) == ("g001p01r01", 4, 1)
    assert (row["client_response_s"], row["server_serve_s"]) == (0.5, 0.4)
    assert (row["window_source"], row["meter_frame_gaps"], row["samples"]) == ("marker", 3, 40)
    assert (row["samples_lost"], row["samples_saturated"]) == (1, 4)
    assert row["initial_window_size"] == 4096
    assert row["client_net_rx_softirqs"] == row["server_tcp_retransmitted_segments"] == 7
    assert (row["settings_mismatch"], row["settings_mismatches"]) == (
        1,
        "initial_window_size 4096 asked, 4095 in force (client SETTINGS_INITIAL_WINDOW_SIZE)",
    )
    assert (row["client_header_table_bytes"], row["server_header_table_bytes"]) == (4096, 0)


def test_a_record_from_before_the_kernel_counts_leaves_their_cells_out() -> None:
    """Records of agents older than agent.kernel_counters have conditions without `kernel`."""
    client = _record("client")
    del client["conditions"]["kernel"]
    row = trial_row(TRIAL, 1, error=None, client=client, server=None, power=None, energy=None)
    assert row["client_temp_c"] == 1
    assert not {column.name for column in kernel_columns()} & set(row)


def test_settings_in_force_as_asked_are_no_mismatch_and_an_unseen_side_is_empty() -> None:
    client = {**_record("client"), "settings_received": None}
    client["settings_announced"] = {"SETTINGS_INITIAL_WINDOW_SIZE": 4096}
    row = trial_row(TRIAL, 1, error=None, client=client, server=None, power=None, energy=None)
    assert (row["settings_mismatch"], row["settings_mismatches"]) == (0, "")
    assert row["client_header_table_bytes"] is None and row["server_header_table_bytes"] is None


def test_a_record_without_an_announcement_leaves_the_settings_cells_empty() -> None:
    client = {key: value for key, value in _record("client").items() if "settings" not in key}
    row = trial_row(TRIAL, 1, error=None, client=client, server=None, power=None, energy=None)
    assert not {"settings_mismatch", "settings_mismatches", "client_header_table_bytes"} & set(row)


def test_a_failed_trial_has_no_cells_of_the_parts_it_lacks() -> None:
    row = trial_row(TRIAL, 1, error="timeout", client=None, server=None, power=None, energy=None)
    assert row["status"] == "failed" and row["error"] == "timeout"
    meter = {"samples_lost", "samples_saturated"}
    assert not {"client_response_s", "server_cpu_s", "window_s", *meter} & set(row)


def test_the_page_splits_its_exchange_in_columns_of_its_own() -> None:
    split = PhaseEnergy("clock_offset", (0.1, 0.3, 0.1), (1.0, 3.0, 1.0), (0.5, 1.5, 0.5),
                        exchange_parts=((0.05, 0.4), (0.25, 2.6)))  # fmt: skip
    client = {**_record("client"), "metrics": {"resource_count": 8, "body_bytes": 100}}
    row = trial_row(TRIAL, 1, error=None, client=client, server=_record("server"), power=POWER,
                    energy=ENERGY, workload="page", phases=split)  # fmt: skip
    assert set(row) <= set(header(AXES, "page", True, True))
    assert (row["page_first_byte_s"], row["page_energy_first_byte_mj"]) == (0.05, 0.4)
    assert (row["page_transfer_s"], row["page_energy_transfer_mj"]) == (0.25, 2.6)
    assert row["phase_clock"] == "clock_offset"


def test_a_trial_listing_its_exchanges_gets_its_energy_per_exchange() -> None:
    kind = "periodic"
    client = {**_record("client"), "metrics": {field.name: 1 for field in SPECS[kind].fields}}
    exchanges = ExchangeEnergy(4, 2.5, 0.5, 0.8, 0.2, 0.0250000004)
    row = trial_row(TRIAL, 1, error=None, client=client, server=_record("server"), power=POWER,
                    energy=ENERGY, workload=kind, phases=PHASES, exchanges=exchanges)  # fmt: skip
    assert set(row) <= set(header(AXES, kind, True, True))
    assert row[f"{kind}_energy_per_report_mj"] == 2.5
    assert row[f"{kind}_idle_tail_energy_mj"] == 0.8
    assert row[f"{kind}_exchange_energy_mean_mj"] == 0.025  # rounded as the energies are
    # An engine whose marks cannot be placed: the spans' cells empty.
    unplaced = ExchangeEnergy(4, 2.5, 0.5)
    bare = trial_row(TRIAL, 1, error=None, client=client, server=None, power=POWER,
                     energy=ENERGY, workload=kind, exchanges=unplaced)  # fmt: skip
    assert bare[f"{kind}_idle_tail_mean_mj"] is None
