"""Checks for one layer: a raw TOML tree in, the same tree with canonical, typed values out.

Each layer (a file, the `--set` overrides) is checked on its own before merging, so an error
always names the layer it sits in and the dotted key as the user wrote it. The string "none"
unsets an optional key, or removes an axis from [sweep] or a role from meter.channels. Checks
that relate keys to each other (a serial meter needs a port) run on the merged result
(`controller.config.build`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.engines import RENAMED, UNREPRESENTABLE_POLICIES, engine_names
from agent.errors import SettingsError
from agent.event_loop import EVENT_LOOPS
from agent.h2.flow import WINDOW_UPDATE_POLICIES
from agent.h2.settings import SETTING_SPECS, canonical_name, check_value
from agent.h3.ack_policy import (
    MAX_ACK_ELICITING_THRESHOLD,
    MAX_MAX_ACK_DELAY_MS,
    MIN_ACK_ELICITING_THRESHOLD,
    MIN_MAX_ACK_DELAY_MS,
)
from agent.h3.settings import MAX_DATAGRAM_BYTES, MIN_DATAGRAM_BYTES
from agent.protocols import PROTOCOLS
from agent.qlog import MIN_MAX_BYTES
from agent.workloads import SPECS
from controller.config.channels import (
    INA226_CHANNEL,
)
from controller.config.meter_sources import source_names
from controller.config.model import (
    AGENT_MODES,
    DATAGRAM_AXIS,
    DELAY_METHODS,
    ENERGY_WINDOWS,
    FAILED_TRIAL,
    IDLE_NOISY,
    ORDERS,
    PPK2_MODES,
    PPK2_SUPPLY_MV,
    PROTOCOL_AXIS,
    ROLES,
    SAMPLERS,
    SEARCH_HOLDS,
    SEARCH_KINDS,
    SENSORS,
    SERVER_ENGINE_AXIS,
)
from controller.config.profile import MAX_PERIOD_US, MIN_PERIOD_US, PROFILE_NAMES
from controller.config.readers import (
    NONE,
    Invalid,
    Reader,
    Schema,
    boolean,
    choice,
    describe,
    integer,
    is_int,
    key_text,
    number,
    optional,
    text,
)
from controller.errors import ConfigError

# firmware/PROTOCOL.md section 1 (builds of the firmware) and section 4 (value ranges).
BAUDS = (115_200, 250_000, 500_000, 1_000_000)
RATE_MIN_HZ, RATE_MAX_HZ, F_CPU_HZ = 100, 10_000, 16_000_000
ANALOG_INPUTS = 8  # A0..A7
MAX_WINDOW = 2**31 - 1  # RFC 9113 section 6.9.1
# Legal HTTP/2, but the client's receive window of 0 deadlocks: the server may send no DATA
# until the client opens the window, and every WINDOW_UPDATE policy of the agent (agent/h2/flow.py)
# opens it only in answer to DATA received. Refused here rather than hung to the trial timeout.
ZERO_WINDOW = (
    "a window of 0 lets the server send no DATA until the client opens it, and the client's "
    "WINDOW_UPDATE policies open it only after DATA arrives: every trial would hang to "
    "run.trial_timeout_s (configs/README.md); use 1 or more"
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_HOST = re.compile(r"[A-Za-z0-9_.:%\[\]][A-Za-z0-9_.:%\[\]-]*")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9._-]*")
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f]+")
_ANALOG = re.compile(r"[Aa]([0-9]+)")
# A decimal address without a leading zero: int(text, 0) refuses "064" (it is not octal).
_I2C_CHANNEL = re.compile(r"(?i:ina(219|226))@(0x[0-9A-Fa-f]+|0|[1-9][0-9]*)")
INA219_ADDRESSES = range(0x40, 0x44)  # the firmware's I2C channels, for both chips


def _engine(value: Any) -> str:
    """An engine's name (agent.engines); a former name refused naming the new one."""
    if isinstance(value, str) and value in RENAMED:
        raise Invalid(f'engine "{value}" is now called "{RENAMED[value]}": use that name')
    name: str = choice(engine_names())(value)
    return name


_printable = text(_PRINTABLE, "a non-empty string without control characters")


def path(value: Any) -> Path:
    return Path(_printable(value)).expanduser()


def rate_hz(value: Any) -> int:
    rate: int = integer(RATE_MIN_HZ, RATE_MAX_HZ)(value)
    if F_CPU_HZ % rate:
        raise Invalid(f"{rate} Hz does not divide 16 MHz, as the meter's sample timer needs")
    return rate


def _axis(name: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise Invalid(f"expected an array of integers, got {describe(value)}")
    if not value:
        raise Invalid("is empty; an axis needs at least one value")
    spec = SETTING_SPECS[name]
    seen: set[int] = set()
    for index, item in enumerate(value):
        if not is_int(item):
            raise Invalid(f"expected an integer, got {describe(item)}", f"[{index}]")
        try:
            check_value(name, item)
        except SettingsError:
            raise Invalid(
                f"{item} is outside {spec.minimum}..{spec.maximum}", f"[{index}]"
            ) from None
        if name == "initial_window_size" and item == 0:
            raise Invalid(ZERO_WINDOW, f"[{index}]")
        if item in seen:
            raise Invalid(f"{item} repeats an earlier value", f"[{index}]")
        seen.add(item)
    return tuple(value)


def _values(value: Any, reader: Reader | None) -> tuple[Any, ...]:
    """The array of a flow-control key's axis (each value read by `reader`) or of a workload
    parameter's (checked against its declaration once the layers are merged and the workload's
    kind is known: build.py)."""
    if not isinstance(value, list):
        raise Invalid(f"expected an array of values, got {describe(value)}")
    if not value:
        raise Invalid("is empty; an axis needs at least one value")
    read: list[Any] = []
    for index, item in enumerate(value):
        try:
            if isinstance(item, list | dict):
                raise Invalid(f"expected a single value, got {describe(item)}")
            read.append(item if reader is None else reader(item))
        except Invalid as exc:
            raise Invalid(str(exc), f"[{index}]") from None
        if any(item == seen and type(item) is type(seen) for seen in value[:index]):
            raise Invalid(f"{describe(item)} repeats an earlier value", f"[{index}]")
    return tuple(read)


def _axis_name(raw: str) -> str:
    try:
        return canonical_name(raw)
    except SettingsError:
        pass
    if raw in SWEEPABLE_KEYS:
        return raw
    known = ", ".join((*SETTING_SPECS, *SWEEPABLE_KEYS))
    raise Invalid(
        f"not an HTTP/2 setting, flow-control key, protocol or workload parameter (known: {known})"
    )


def sweep(value: Any) -> dict[str, tuple[Any, ...] | None]:
    """[sweep]: axis name -> array of values. An axis is an HTTP/2 setting (any spelling
    agent.h2.settings accepts), a flow-control key of [workload], or a parameter of a workload."""
    if not isinstance(value, dict):
        raise Invalid(f"expected a table of axis = [values], got {describe(value)}")
    axes: dict[str, tuple[Any, ...] | None] = {}
    for raw, values in value.items():
        at = f".{key_text(raw)}"
        try:
            name = _axis_name(raw)
            if name in axes:
                raise Invalid(f"names the axis {name} a second time")
            if values == NONE:
                axes[name] = None
            elif name in SETTING_SPECS:
                axes[name] = _axis(name, values)
            else:
                axes[name] = _values(values, OTHER_AXES.get(name))
        except Invalid as exc:
            raise Invalid(str(exc), at + exc.at) from None
    return axes


def _analog_input(value: Any) -> int:
    """An analog input ("A0".."A7", 0..7), an INA219 ("INA219@0x40".."INA219@0x43", stored as
    its I2C address) or an INA226 ("INA226@0x40".."INA226@0x43", stored as its address with
    channels.INA226_CHANNEL set)."""
    if isinstance(value, str) and (match := _I2C_CHANNEL.fullmatch(value)):
        chip = f"INA{match[1]}"
        address = int(match[2], 0)
        if address not in INA219_ADDRESSES:
            raise Invalid(
                f"{chip} address {address:#04x} is outside 0x40..0x43 (A1 = GND, A0 = GND..SCL)"
            )
        return address | (INA226_CHANNEL if chip == "INA226" else 0)
    if isinstance(value, str) and (match := _ANALOG.fullmatch(value)):
        value = int(match[1])
    elif not is_int(value):
        raise Invalid(
            'expected an analog input ("A0".."A7" or 0..7), an INA219 ("INA219@0x40".."0x43") or'
            f' an INA226 ("INA226@0x40".."0x43"), got {describe(value)}'
        )
    if not 0 <= value < ANALOG_INPUTS:
        raise Invalid(f"{value} is outside 0..{ANALOG_INPUTS - 1} (A0..A{ANALOG_INPUTS - 1})")
    return int(value)


def logic_input(value: Any) -> int:
    """meter.marker_input: a PPK2 logic input, "D0".."D7" (or 0..7)."""
    if isinstance(value, str) and re.fullmatch(r"D[0-7]", value):
        return int(value[1])
    if is_int(value) and 0 <= value <= 7:
        return int(value)
    raise Invalid(f'expected a logic input "D0".."D7", got {describe(value)}')


def channels(value: Any) -> dict[str, int | None]:
    """meter.channels: node role -> the analog input its current sensor is wired to."""
    if not isinstance(value, dict):
        raise Invalid(f"expected a table of role = analog input, got {describe(value)}")
    mapping: dict[str, int | None] = {}
    for role, channel in value.items():
        at = f".{key_text(role)}"
        if role not in ROLES:
            raise Invalid(f"unknown node role (known: {', '.join(ROLES)})", at)
        try:
            mapping[role] = None if channel == NONE else _analog_input(channel)
        except Invalid as exc:
            raise Invalid(str(exc), at) from None
    return mapping


_HOST_READER = text(_HOST, "a host name or address")
_COLUMN = text(re.compile(r"[a-z][a-z0-9_]{0,63}"), "a trials.csv column name")


def _objectives(value: Any) -> tuple[str, ...]:
    """An optimising search's objectives: one or two trials.csv columns."""
    if not isinstance(value, list) or not 1 <= len(value) <= 2:
        raise Invalid(f"expected an array of one or two column names, got {describe(value)}")
    for index, item in enumerate(value):
        try:
            _COLUMN(item)
        except Invalid as exc:
            raise Invalid(str(exc), f"[{index}]") from None
    if len(set(value)) < len(value):
        raise Invalid("names one column twice", "[1]")
    return tuple(value)


# trials.csv metrics a point can settle on (the run format's names).
STOP_METRICS = (
    "client_response_s",
    "client_cpu_s",
    "energy_mj",
    "energy_above_idle_mj",
    "server_serve_s",
    "server_cpu_s",
)
_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")
_GPIO_MARKER = re.compile(r"gpio:[A-Za-z0-9_./-]+:[0-9]{1,4}")

_DEVICE: dict[str, Reader] = {
    "profile": choice(PROFILE_NAMES),
    "speed_fraction": optional(number(0, 1, low_open=True)),
    "cpu_quota": optional(number(0, 1, low_open=True)),
    "cpu_period_us": integer(MIN_PERIOD_US, MAX_PERIOD_US),
    "cores": integer(1, 4096),
    "memory_mib": optional(integer(4, 2**20)),
    "peak_current_ma": optional(number(0, 100_000, low_open=True)),
}


def device(value: Any) -> dict[str, Any]:
    """nodes.<role>.device: a profile's name, or a table of its values (`profile` to start
    from, the rest override it); both come out as a table."""
    if isinstance(value, str):
        return {"profile": _DEVICE["profile"](value)}
    if not isinstance(value, dict):
        names = ", ".join(json.dumps(name) for name in PROFILE_NAMES[1:])
        raise Invalid(f"expected a profile name ({names}) or a table, got {describe(value)}")
    return _read_table(value, _DEVICE)


def _read_table(
    table: dict[str, Any], readers: Mapping[str, Reader], at: str = ""
) -> dict[str, Any]:
    """Each key of `table` read by its reader; an unknown key or a bad value is an error at
    `at` and the key."""
    checked: dict[str, Any] = {}
    for key, item in table.items():
        key_at = f"{at}.{key_text(key)}"
        if key not in readers:
            raise Invalid(_unknown("", key, readers), key_at)
        try:
            checked[key] = readers[key](item)
        except Invalid as exc:
            raise Invalid(str(exc), key_at + exc.at) from None
    return checked


_NODE: dict[str, Reader] = {
    "host": _HOST_READER,
    "user": optional(text(_USER, "a user name")),
    "port": integer(1, 65535),
    "key": optional(path),
    "known_hosts": optional(path),
    "python": _printable,
    "deploy_dir": _printable,
    "cpu": optional(integer(0, 4095)),
    "address": _HOST_READER,
    "data_interface": optional(text(_IFNAME, "a network interface name (at most 15 characters)")),
    "engine": _engine,
    "marker": optional(text(_GPIO_MARKER, "gpio:CHIP:LINE, e.g. gpio:gpiochip0:17")),
    "device": optional(device),
    "remote_device": boolean,
}


MAX_CLIENTS = 64
_CLIENT_ENTRY: dict[str, Reader] = {
    **_NODE,
    "name": text(_NAME, "a node name of letters, digits, '.', '_' or '-' (at most 64)"),
}


def clients(value: Any) -> list[dict[str, Any]]:
    """nodes.clients: an array of client node tables (`[[nodes.clients]]`), each with the keys
    of nodes.client (which gives their shared values) and an optional `name`."""
    if not isinstance(value, list):
        raise Invalid(f"expected an array of tables ([[nodes.clients]]), got {describe(value)}")
    if not 1 <= len(value) <= MAX_CLIENTS:
        raise Invalid(f"has {len(value)} client nodes; give 1..{MAX_CLIENTS}")
    entries = []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise Invalid(f"expected a table, got {describe(entry)}", f"[{index}]")
        entries.append(_read_table(entry, _CLIENT_ENTRY, f"[{index}]"))
    return entries


def _single(value: Any) -> Any:
    if isinstance(value, list | dict):
        raise Invalid(f"expected a single value, got {describe(value)}")
    return value


def _window(value: Any) -> int:
    window: int = integer(0, MAX_WINDOW)(value)
    if window == 0:
        raise Invalid(ZERO_WINDOW)
    return window


FLOW_READERS: dict[str, Reader] = {
    "connection_window": optional(_window),
    "window_update_policy": choice(WINDOW_UPDATE_POLICIES),
}
# [workload] protocol: HTTP/2 in cleartext or over TLS, or HTTP/3 (model.PROTOCOLS); HTTP/3's
# datagram size (max_udp_payload_size, RFC 9000's 1200 up to qh3's 65527) and its client's ACK
# policy (agent.h3.ack_policy).
PROTOCOL_READERS: dict[str, Reader] = {
    PROTOCOL_AXIS: choice(PROTOCOLS),
    DATAGRAM_AXIS: optional(integer(MIN_DATAGRAM_BYTES, MAX_DATAGRAM_BYTES)),
    "ack_eliciting_threshold": optional(
        integer(MIN_ACK_ELICITING_THRESHOLD, MAX_ACK_ELICITING_THRESHOLD)
    ),
    "max_ack_delay_ms": optional(integer(MIN_MAX_ACK_DELAY_MS, MAX_MAX_ACK_DELAY_MS)),
}
PARAM_NAMES = tuple(dict.fromkeys(p.name for spec in SPECS.values() for p in spec.params))
# Node keys a sweep may vary: the server's stack (model.SERVER_ENGINE_AXIS).
NODE_AXES: dict[str, Reader] = {SERVER_ENGINE_AXIS: _engine}
SWEEPABLE_KEYS = (*FLOW_READERS, *PROTOCOL_READERS, *PARAM_NAMES, *NODE_AXES)
# Axes that are neither a setting nor a workload parameter, with the reader of their values.
OTHER_AXES: dict[str, Reader] = {**FLOW_READERS, **PROTOCOL_READERS, **NODE_AXES}


SCHEMA: Schema = {
    "run": {
        "name": text(_NAME, "a name of letters, digits, '.', '_' or '-' (at most 64)"),
        "seed": integer(0, 2**63 - 1),
        "repetitions": integer(1, 1_000_000),
        "confidence": number(0, 1, low_open=True, high_open=True),
        "order": choice(ORDERS),
        "idle_baseline_s": number(0, 3600),
        "retries": integer(0, 100),
        "trial_timeout_s": number(0, 86400, low_open=True),
        "agent": choice(AGENT_MODES),
        "event_loop": choice(EVENT_LOOPS),
        "server_event_loop": choice(EVENT_LOOPS),
        "stop_metric": choice(STOP_METRICS),
        "stop_half_width": optional(number(0, 1, low_open=True)),
        "stop_min_n": integer(2, 1_000_000),
        "events": boolean,
        "events_max_bytes": integer(MIN_MAX_BYTES, 1 << 40),
    },
    "sweep": sweep,
    "workload": {
        "kind": choice(tuple(SPECS)),
        **FLOW_READERS,
        **PROTOCOL_READERS,
        "unrepresentable_window": choice(UNREPRESENTABLE_POLICIES),
        # Checked against the kind's declaration once the layers are merged (build.py).
        **dict.fromkeys(PARAM_NAMES, _single),
    },
    "nodes": {
        "client": _NODE,
        "server": {**_NODE, "http_port": integer(1, 65535)},
        "clients": optional(clients),
    },
    "meter": {
        "source": choice(source_names()),
        "port": optional(_printable),
        "baud": choice(BAUDS),
        "rate_hz": rate_hz,
        "channels": channels,
        "sensor": choice(SENSORS),
        "supply_v": number(0, 48, low_open=True),
        "calibration": optional(path),
        "shunt_ohm": number(0, 100, low_open=True),
        "network_nj_per_byte": number(0, 1e6),
        "mode": choice(PPK2_MODES),
        "supply_mv": optional(integer(*PPK2_SUPPLY_MV)),
        "marker_input": logic_input,
        "max_saturated_fraction": number(0, 1),
        "max_lost_fraction": number(0, 1),
    },
    "link": {
        "rate_mbit": optional(number(0, 100_000, low_open=True)),
        "loss_pct": number(0, 100, high_open=True),
        "delay_ms": number(0, 60_000),
        "delay_method": choice(DELAY_METHODS),
    },
    "energy": {
        "window": choice(ENERGY_WINDOWS),
        "idle_tolerance_mw": number(0, 1e6, low_open=True),
        "idle_wait_s": number(0, 3600),
        "idle_noisy": choice(IDLE_NOISY),
        "idle_end": boolean,
    },
    # Checked against the workload and the sweep once the layers are merged (build.py).
    "search": {
        "kind": choice(SEARCH_KINDS),
        "objectives": _objectives,
        "budget": integer(2, 10_000_000),
        "sampler": choice(SAMPLERS),
        "tolerance": number(0, 1, high_open=True),
        "param": _COLUMN,
        "low": number(0, 1e15, low_open=True),
        "high": number(0, 1e15, low_open=True),
        "metric": _COLUMN,
        "relative_to": optional(_COLUMN),
        "threshold": number(-1e15, 1e15),
        "holds": choice(SEARCH_HOLDS),
        "repetitions": integer(1, 10_000),
        "max_repetitions": integer(1, 10_000),
        "resolution": number(1, 1e6, low_open=True),
        "unit_bytes": optional(number(0, 1e9, low_open=True)),
        "failed_trial": choice(FAILED_TRIAL),
    },
}

_HINTS = {"nodes.client.http_port": "the client connects to nodes.server.http_port"}


def _unknown(dotted: str, key: str, known: Mapping[str, object]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = _HINTS.get(dotted) or (f"did you mean {close[0]}?" if close else "")
    listing = f"known: {', '.join(known)}" + (f"; {hint}" if hint else "")
    return f"unknown key ({listing})"


def _check(value: Any, schema: Schema, source: str, dotted: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        where = f"{dotted}: " if dotted else ""
        raise ConfigError(f"{source}: {where}expected a table, got {describe(value)}")
    checked: dict[str, Any] = {}
    for key, item in value.items():
        here = f"{dotted}.{key_text(key)}" if dotted else key_text(key)
        if key not in schema:
            raise ConfigError(f"{source}: {here}: {_unknown(here, key, schema)}")
        rule = schema[key]
        if isinstance(rule, Mapping):
            checked[key] = _check(item, rule, source, here)
            continue
        try:
            checked[key] = rule(item)
        except Invalid as exc:
            raise ConfigError(f"{source}: {here}{exc.at}: {exc}") from None
    return checked


def check_layer(tree: Mapping[str, Any], source: str) -> dict[str, Any]:
    """One layer's values, typed and canonical; ConfigError names `source` and the key."""
    return _check(dict(tree), SCHEMA, source, "")
