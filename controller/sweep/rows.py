"""Build one trials.csv row from what a trial produced. Pure.

The columns are analysis.trial_columns'; a cell its column's `source` names is copied from that
part of the trial as it is, the others are derived here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.protocols.in_force import SettingsExchange, in_force, mismatches
from agent.workloads import DEFAULT_KIND, SPECS
from analysis.trial_columns import (
    CONDITION_FIELDS,
    EXCHANGE_ENERGY_FIELDS,
    KERNEL_FIELDS,
    LEADING_COLUMNS,
    METRIC_COLUMNS,
    PHASES,
)
from controller.energy import WindowEnergy
from controller.nodes.agent import TRIAL_PROCESS
from controller.sweep.agent_pair import TRIAL_INTERFACE
from controller.sweep.exchanges import ExchangeEnergy
from controller.sweep.interfaces import PowerWindow
from controller.sweep.phases import PhaseEnergy
from controller.sweep.plan import PlannedTrial

# (column, part, name) for each column that copies a part of the trial as it is.
_COPIED = tuple(
    (column.name, *column.source.split("."))
    for column in LEADING_COLUMNS + METRIC_COLUMNS
    if column.source
)


def _frames(record: Mapping[str, Any], direction: str, frame_type: str) -> int | None:
    counts = record.get(direction)
    if not isinstance(counts, Mapping):
        return None
    frames = counts.get("frames", {})
    return int(frames.get(frame_type, 0)) if isinstance(frames, Mapping) else None


def _bytes(record: Mapping[str, Any], direction: str) -> int | None:
    counts = record.get(direction)
    return int(counts["bytes"]) if isinstance(counts, Mapping) and "bytes" in counts else None


def _cpu_pct(record: Mapping[str, Any]) -> object:
    """client_cpu_s / client_response_s in percent of one core, as data/README.md defines it
    (the agent's own cpu_pct divides by the span its probe measured, a little longer)."""
    cpu, response = record.get("cpu_s"), record.get("response_s")
    if isinstance(cpu, int | float) and isinstance(response, int | float) and response > 0:
        return 100.0 * cpu / response
    return record.get("cpu_pct")


def condition_cells(role: str, record: Mapping[str, Any]) -> dict[str, object]:
    """The node's conditions from its trial record (agent.conditions), and its kernel's work
    over the trial (their `kernel`, agent.kernel_counters): `<role>_<field>`."""
    conditions = record.get("conditions")
    if not isinstance(conditions, Mapping):
        return {}
    kernel = conditions.get("kernel")
    kernel = kernel if isinstance(kernel, Mapping) else {}
    cells: dict[str, object] = {
        f"{role}_{field.name}": part.get(field.name)
        for part, fields in ((conditions, CONDITION_FIELDS), (kernel, KERNEL_FIELDS))
        for field in fields
        if field.name in part
    }
    flags = conditions.get("throttled_flags")
    cells[f"{role}_throttled_flags"] = hex(flags) if isinstance(flags, int) else None
    missing = conditions.get("unavailable")
    if isinstance(missing, Mapping):
        cells[f"{role}_conditions_missing"] = "; ".join(f"{k}: {v}" for k, v in missing.items())
    return cells


def _quic_cells(role: str, record: Mapping[str, Any]) -> dict[str, object]:
    """An HTTP/3 trial's QUIC counts from a node's record (agent/README.md, "HTTP/3"); none
    for an HTTP/2 trial's, which has no `transport`."""
    transport = record.get("transport")
    if not isinstance(transport, Mapping):
        return {}
    cells: dict[str, object] = {
        f"{role}_packets_lost": transport.get("packets_lost"),
        f"{role}_pto_count": transport.get("pto_count"),
    }
    if role == "client":
        cells["client_datagrams_received"] = _frames(record, "received", "datagrams")
        cells["client_datagrams_sent"] = _frames(record, "sent", "datagrams")
    else:
        cells["server_max_stream_data_frames"] = transport.get("max_stream_data_frames")
        cells["server_max_data_frames"] = transport.get("max_data_frames")
        cells["server_stream_credit_ahead_bytes"] = transport.get(
            "largest_stream_credit_ahead_bytes"
        )
    return cells


def settings_exchange_of(
    record: Mapping[str, Any], server: Mapping[str, Any] | None = None
) -> SettingsExchange | None:
    """The client's announcement and what it received, from its record; None where the record
    has no announcement (a trial that never ran, an agent from before them). Where the client
    could not see what it received (nghttp), the server's record of what it announced on the
    trial's connection stands in: the same SETTINGS, read at the other end."""
    announced, received = record.get("settings_announced"), record.get("settings_received")
    if not isinstance(announced, Mapping):
        return None
    if not isinstance(received, Mapping) and server is not None:
        received = server.get("settings_announced")
    return SettingsExchange(announced, received if isinstance(received, Mapping) else None)


def settings_cells(
    protocol: str,
    asked: Mapping[str, int],
    record: Mapping[str, Any],
    server: Mapping[str, Any] | None = None,
) -> dict[str, object]:
    """What was in force against what the point asked (analysis.trial_columns'
    SETTINGS_COLUMNS), from the client's record (and the server's, `settings_exchange_of`)."""
    exchange = settings_exchange_of(record, server)
    if exchange is None:
        return {}
    found = mismatches(protocol, asked, exchange)
    return {
        "settings_mismatch": int(bool(found)),
        "settings_mismatches": "; ".join(m.describe() for m in found),
        "client_header_table_bytes": in_force(protocol, "header_table_size", "client", exchange),
        "server_header_table_bytes": in_force(protocol, "header_table_size", "server", exchange),
    }


def _copied(parts: Mapping[str, object | None]) -> dict[str, object]:
    """The cells copied from the trial's parts that it has (a record's missing key: None)."""
    cells: dict[str, object] = {}
    for column, part, name in _COPIED:
        source = parts[part]
        if isinstance(source, Mapping):
            cells[column] = source.get(name)
        elif source is not None:
            cells[column] = getattr(source, name)
    return cells


def trial_row(
    trial: PlannedTrial,
    attempt: int,
    *,
    error: str | None,
    client: Mapping[str, Any] | None,
    server: Mapping[str, Any] | None,
    power: PowerWindow | None,
    energy: WindowEnergy | None,
    workload: str = DEFAULT_KIND,
    bench: str | None = None,
    phases: PhaseEnergy | None = None,
    exchanges: ExchangeEnergy | None = None,
) -> dict[str, object]:
    parts = {"trial": trial, "point": trial.point, "client": client, "server": server,
             "power": power, "energy": energy}  # fmt: skip
    row: dict[str, object] = {
        "attempt": attempt,
        "status": "ok" if error is None else "failed",
        "error": error or "",
        "workload": workload,
        "protocol": trial.point.protocol,
        **dict(trial.point.axes),
        **_copied(parts),
    }
    if trial.probe is not None:
        row["search_group"], row["search_probe"] = trial.probe
    if bench is not None:
        row["bench"] = bench
    if client is not None:
        flow = client.get("flow_control")
        if isinstance(flow, Mapping):
            row["client_window_on_wire"] = flow.get(
                "initial_window_size_on_wire", flow.get("initial_window_size")
            )
        row.update(
            client_cpu_pct=_cpu_pct(client),
            client_bytes_received=_bytes(client, "received"),
            client_bytes_sent=_bytes(client, "sent"),
            client_data_frames=_frames(client, "received", "DATA"),
            client_window_update_frames=_frames(client, "sent", "WINDOW_UPDATE"),
        )
        interface = client.get(TRIAL_INTERFACE)
        if isinstance(interface, Mapping):
            row["client_interface_bytes"] = interface.get("bytes")
            row["client_interface_packets"] = interface.get("packets")
        process = client.get(TRIAL_PROCESS)
        if isinstance(process, Mapping):
            row["client_process_s"] = (
                int(process["t_mono_end_ns"]) - int(process["t_mono_start_ns"])
            ) / 1e9
            row["client_process_cpu_s"] = process["cpu_s"]
        metrics = client.get("metrics")
        if isinstance(metrics, Mapping):
            # The declared fields only: the columns were fixed when the run was created.
            for field in SPECS[workload].fields:
                row[f"{workload}_{field.name}"] = metrics.get(field.name)
        row.update(condition_cells("client", client))
        row.update(_quic_cells("client", client))
        row.update(settings_cells(trial.point.protocol, dict(trial.point.settings), client, server))
    if server is not None:
        row.update(
            server_bytes_sent=_bytes(server, "sent"),
            server_data_frames=_frames(server, "sent", "DATA"),
        )
        row.update(condition_cells("server", server))
        row.update(_quic_cells("server", server))
    if energy is not None:
        row.update(
            energy_mj=round(energy.energy_mj, 6),
            energy_above_idle_mj=round(energy.energy_above_idle_mj, 6),
            mean_power_mw=round(energy.mean_power_mw, 6),
        )
    if phases is not None:
        row.update(_phase_cells(phases, workload))
    if exchanges is not None:
        row.update(_exchange_cells(exchanges, workload))
    return row


def _exchange_cells(exchanges: ExchangeEnergy, workload: str) -> dict[str, object]:
    """The trial's energy per exchange (analysis.trial_columns.EXCHANGE_ENERGY_FIELDS)."""
    values = {column.name: getattr(exchanges, column.name) for column in EXCHANGE_ENERGY_FIELDS}
    return {
        f"{workload}_{name}": None if value is None else round(value, 6)
        for name, value in values.items()
    }


def _phase_cells(phases: PhaseEnergy, workload: str) -> dict[str, object]:
    """The window's phases, and the workload's split of the exchange where it declares one."""
    cells: dict[str, object] = {"phase_clock": phases.phase_clock}
    for phase, duration, energy_mj, above in zip(
        PHASES, phases.durations_s, phases.energies_mj, phases.above_idle_mj, strict=True
    ):
        cells[f"phase_{phase}_s"] = duration
        cells[f"energy_{phase}_mj"] = round(energy_mj, 6)
        cells[f"energy_{phase}_above_idle_mj"] = round(above, 6)
    split = SPECS[workload].exchange_split
    if split is not None and phases.exchange_parts is not None:
        for part, (duration, energy_mj) in zip(split, phases.exchange_parts, strict=True):
            cells[f"{workload}_{part}_s"] = duration
            cells[f"{workload}_energy_{part}_mj"] = round(energy_mj, 6)
    return cells
