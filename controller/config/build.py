"""From the merged tree to a `Config`: node defaults that depend on the transport, and the checks
that relate keys to each other (each blames the layer that set the deciding key).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from agent.engines import (
    ENGINE_SPECS,
    ENGINES,
    NGTCP2_SETTINGS,
    SERVER_ONLY_ENGINES,
    EngineSpec,
)
from agent.errors import SettingsError
from agent.flow import DEFAULT_WINDOW_UPDATE_POLICY
from agent.h3.settings import refuse_without_counterpart
from agent.settings import SETTING_SPECS
from agent.workloads import SPECS, ParamError
from analysis.trial_columns import METRIC_COLUMNS, workload_columns
from controller.config.clients import check_clients
from controller.config.layers import KeyPath, Stack
from controller.config.model import (
    DATAGRAM_AXIS,
    IDLE_MIN_SAMPLES,
    INA219_RATE_MAX_HZ,
    INA226_RATE_MAX_HZ,
    LOCAL_HOST,
    PPK2_RATE_HZ,
    PROTOCOL_AXIS,
    ROLES,
    SERVER_ENGINE_AXIS,
    AxisValue,
    Config,
    EnergyConfig,
    LinkConfig,
    MeterConfig,
    NodeConfig,
    OptimizeConfig,
    Role,
    RunConfig,
    SearchConfig,
    SweepConfig,
    WorkloadConfig,
    channel_label,
    channel_source,
    is_ina219,
    is_ina226,
)
from controller.config.profile import DeviceProfile, not_applied_message, resolve
from controller.config.schema import OTHER_AXES, PARAM_NAMES
from controller.errors import ConfigError

DEFAULTS = "<defaults>"

SSH_DEPLOY_DIR = "~/h2iot"
LOCAL_CPU: dict[Role, int] = {"client": 0, "server": 1}


def default_values() -> list[tuple[KeyPath, Any]]:
    """The built-in layer: the records' own defaults. Nodes get only `host`: the rest of a
    node's defaults depend on whether it is local or SSH, so they are filled in after merging."""
    sections: dict[str, Any] = {
        "run": asdict(RunConfig()),
        "sweep": dict(SweepConfig().axes),
        "workload": {
            key: value
            for key, value in asdict(WorkloadConfig()).items()
            if key != "params"  # filled from the kind's declaration once the kind is known
        },
        "nodes": {role: {"host": LOCAL_HOST} for role in ROLES},
        "meter": {**asdict(MeterConfig()), "channels": dict(MeterConfig().channels)},
        "link": asdict(LinkConfig()),
        "energy": asdict(EnergyConfig()),
    }
    # An unset optional key stays out of the tree (the record's default, None, applies), so the
    # tree holds a None only where a layer said "none": that layer is the one to blame.
    return [
        ((name,), {key: value for key, value in values.items() if value is not None})
        for name, values in sections.items()
    ]


def _blame(stack: Stack, missing: str, deciding: str) -> str:
    """A key that is required but unset: blame whoever unset it, else whoever required it."""
    return stack.origins.get(missing) or stack.origin(deciding)


def _node(
    stack: Stack, role: Role, given: dict[str, Any] | None = None, key: str | None = None
) -> NodeConfig:
    """nodes.<role>, or (`given`, `key`) an entry of nodes.clients over nodes.client."""
    given = dict(stack.tree["nodes"][role]) if given is None else given
    key = key or f"nodes.{role}"
    host: str = given["host"]
    local = host == LOCAL_HOST
    server_host: str = stack.tree["nodes"]["server"]["host"]
    deploy_dir: str = given.get("deploy_dir", "" if local else SSH_DEPLOY_DIR)
    if role == "server":
        address = "127.0.0.1" if local else "0.0.0.0"
    else:
        address = "127.0.0.1" if server_host == LOCAL_HOST else server_host
    defaults: dict[str, Any] = {
        "deploy_dir": deploy_dir,
        "python": sys.executable if local else f"{deploy_dir}/venv/bin/python",
        "cpu": LOCAL_CPU[role] if local else None,
        "address": address,
    }
    if given.get("remote_device") and local:
        where = f"{key}.remote_device"
        raise ConfigError(
            f"{stack.origin(where)}: {where}: only for SSH nodes (a local node's device is always "
            "emulated); unset it"
        )
    if given.get("device") is not None:
        remote = bool(given.get("remote_device"))
        given = {**given, "device": _device(stack, role, local or remote, given["device"])}
    node = NodeConfig(role=role, **{**defaults, **given})
    if role == "server" and node.marker is not None:
        raise ConfigError(
            f"{stack.origin('nodes.server.marker')}: nodes.server.marker: the marker is the "
            "client's (it raises the line for each trial it runs)"
        )
    if not local and node.known_hosts is None:
        where = f"{key}.known_hosts"
        raise ConfigError(
            f"{_blame(stack, where, f'{key}.host')}: {where}: required for an SSH node "
            f"(host {json.dumps(host)}): its host key is checked against this file and an "
            "unknown or changed key is refused, never accepted silently"
        )
    return node


def _clients(stack: Stack) -> tuple[NodeConfig, ...]:
    """nodes.clients: each entry over nodes.client's keys (their shared values), named
    client1, client2, ... unless it names itself."""
    entries = stack.tree["nodes"].get("clients")
    if not entries:
        return ()
    shared = dict(stack.tree["nodes"]["client"])
    nodes = []
    for index, entry in enumerate(entries):
        given = {**shared, **entry, "name": entry.get("name", f"client{index + 1}")}
        nodes.append(_node(stack, "client", given, f"nodes.clients[{index}]"))
    return tuple(nodes)


def _device(stack: Stack, role: Role, applied: bool, given: dict[str, Any]) -> DeviceProfile:
    key = f"nodes.{role}.device"
    if not applied:
        raise ConfigError(f"{stack.origin(key)}: {key}: {not_applied_message(role)}")
    try:
        return resolve(given)
    except ValueError as exc:
        raise ConfigError(f"{stack.origin(key)}: {key}: {exc}") from None


def _meter(stack: Stack) -> MeterConfig:
    given: dict[str, Any] = dict(stack.tree["meter"])
    mapping: dict[Role, int] = given.pop("channels")
    if not mapping:
        raise ConfigError(
            f"{stack.origin('meter.channels')}: meter.channels: no node is metered; "
            'map at least one role to an analog input, e.g. client = "A0"'
        )
    if len(mapping) == len(ROLES) and len(set(mapping.values())) == 1:
        # Blame the role whose input a later layer set.
        later, earlier = sorted(
            ROLES, key=lambda role: stack.layers.index(stack.origin(f"meter.channels.{role}"))
        )[::-1]
        key = f"meter.channels.{later}"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: {channel_label(mapping[later])} is already the "
            f"{earlier}'s input"
        )
    if len(mapping) == len(ROLES) and len({channel_source(c) for c in mapping.values()}) == 1:
        later = sorted(
            ROLES, key=lambda role: stack.layers.index(stack.origin(f"meter.channels.{role}"))
        )[-1]
        key = f"meter.channels.{later}"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: {channel_label(mapping[later])} shares its modelled "
            "source with the other node's channel (An and INA219@0x40+n follow the same "
            "source): use another input or address"
        )
    rate = given.get("rate_hz", MeterConfig.rate_hz)
    # An I2C monitor converts at its own pace: the INA219 at a fixed 1064 us, the INA226 as
    # configured for the rate (its fastest result, 2 x 140 us, must fit in 90 % of a period).
    limits = (
        (is_ina219, "INA219", INA219_RATE_MAX_HZ, 800),
        (is_ina226, "INA226", INA226_RATE_MAX_HZ, 2500),
    )
    for is_kind, chip, rate_max, example in limits:
        ina = [role for role in ROLES if role in mapping and is_kind(mapping[role])]
        if ina and rate > rate_max:
            key = f"meter.channels.{ina[0]}"
            # blame whichever of the two keys a later layer set
            later_origin = max(
                (stack.origin("meter.rate_hz"), stack.origin(key)), key=stack.layers.index
            )
            raise ConfigError(
                f"{later_origin}: meter.rate_hz: {rate} Hz is faster than an "
                f"{chip} converts ({key} = {channel_label(mapping[ina[0]])}): at most "
                f"{rate_max} Hz, e.g. {example}"
            )
    meter = MeterConfig(
        channels=tuple((role, mapping[role]) for role in ROLES if role in mapping), **given
    )
    if meter.spec.needs_port and meter.port is None:
        raise ConfigError(
            f"{_blame(stack, 'meter.port', 'meter.source')}: meter.port: required when "
            f'meter.source is "{meter.source}": the board\'s serial device, e.g. "/dev/ttyACM0"'
        )
    if meter.spec.wire == "ppk2":
        _check_ppk2(stack, meter)
    return meter


def _check_ppk2(stack: Stack, meter: MeterConfig) -> None:
    """A PPK2 measures one supply (the client's) at 100 kS/s, averaged to meter.rate_hz."""
    later = max(stack.origin("meter.source"), stack.origin("meter.rate_hz"), key=stack.layers.index)
    if PPK2_RATE_HZ % meter.rate_hz:
        raise ConfigError(
            f"{later}: meter.rate_hz: {meter.rate_hz} Hz does not divide the PPK2's "
            f'{PPK2_RATE_HZ} samples/s (meter.source = "ppk2"), e.g. 1000 or 10000'
        )
    roles = [role for role, _c in meter.channels]
    if roles != ["client"]:
        key = "meter.channels.server"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: a PPK2 measures one supply, the client's "
            '(meter.source = "ppk2"); unset it: server = "none"'
        )
    if meter.mode == "source" and meter.supply_mv is None:
        raise ConfigError(
            f"{_blame(stack, 'meter.supply_mv', 'meter.mode')}: meter.supply_mv: required when "
            'meter.mode is "source": the voltage the PPK2 powers the node at, 800..5000 mV'
        )


def _earlier(stack: Stack, key: str, than: str) -> bool:
    """Whether `key` was set by a lower layer than the one that set `than`."""
    return stack.layers.index(stack.origin(key)) < stack.layers.index(stack.origin(than))


def _workload(stack: Stack) -> WorkloadConfig:
    """[workload]: the kind, its parameters (each checked against the kind's declaration,
    defaults filled in) and the client's flow-control keys."""
    given: dict[str, Any] = dict(stack.tree["workload"])
    spec = SPECS[given.pop("kind")]
    params = spec.defaults()
    for name in PARAM_NAMES:
        if name not in given:
            continue
        value = given.pop(name)
        key = f"workload.{name}"
        if name not in params:
            if _earlier(stack, key, "workload.kind"):
                # Set for the kind a lower layer chose (configs/local.toml's page), before a
                # later layer (`--set workload.kind=blob`) chose another: not this run's.
                continue
            raise ConfigError(
                f"{stack.origin(key)}: {key}: not a parameter of workload {spec.kind!r} "
                f"(its parameters: {', '.join(spec.param_names) or 'none'})"
            )
        try:
            params[name] = spec.param(name).check(value)
        except ParamError as exc:
            raise ConfigError(f"{stack.origin(key)}: {key}: {exc.reason}") from None
    return WorkloadConfig(kind=spec.kind, params=tuple(params.items()), **given)


def _axes(stack: Stack, workload: WorkloadConfig) -> tuple[tuple[str, tuple[AxisValue, ...]], ...]:
    """[sweep]: settings and flow-control keys were checked with their layer; a workload
    parameter's values are checked here, against the kind's declaration."""
    axes = tuple(stack.tree["sweep"].items())
    if not axes:
        raise ConfigError(
            f"{stack.origin('sweep')}: sweep: no axis; give at least one setting or workload "
            "parameter with an array of values, e.g. initial_window_size = [4096, 65535]"
        )
    spec = SPECS[workload.kind]
    checked = []
    for name, values in axes:
        if name in SETTING_SPECS or name in OTHER_AXES:
            checked.append((name, values))
            continue
        key = f"sweep.{name}"
        if name not in spec.param_names:
            raise ConfigError(
                f"{stack.origin(key)}: {key}: not a parameter of workload {spec.kind!r} "
                f"(its parameters: {', '.join(spec.param_names) or 'none'})"
            )
        param = spec.param(name)
        canonical = []
        for index, value in enumerate(values):
            try:
                canonical.append(param.check(value))
            except ParamError as exc:
                raise ConfigError(f"{stack.origin(key)}: {key}[{index}]: {exc.reason}") from None
        checked.append((name, tuple(canonical)))
    return tuple(checked)


def build(stack: Stack, source: str) -> Config:
    """The validated `Config` for a merged stack of layers."""
    workload = _workload(stack)
    sweep = SweepConfig(axes=_axes(stack, workload))
    clients = _clients(stack)
    config = Config(
        run=RunConfig(**stack.tree["run"]),
        sweep=sweep,
        workload=workload,
        client=clients[0] if clients else _node(stack, "client"),
        server=_node(stack, "server"),
        clients=clients,
        meter=_meter(stack),
        link=LinkConfig(**stack.tree["link"]),
        energy=EnergyConfig(**stack.tree["energy"]),
        search=_search(stack, workload, sweep),
        source=source,
        layers=tuple(stack.layers),
        origins=tuple(
            (key, layer) for key, layer in sorted(stack.origins.items()) if layer != DEFAULTS
        ),
    )
    _check_engines(stack, config)
    _check_energy_window(stack, config)
    _check_agent_mode(stack, config)
    _check_event_loop(stack, config)
    _check_protocol(stack, config)
    _check_idle_baseline(stack, config)
    check_clients(stack, config)
    return config


_SEARCH_REQUIRED = ("param", "low", "high", "metric")
_OPTIMIZE_REQUIRED = ("objectives", "budget")
_SEARCH_NAMES = {"breakdown": "a breakdown search", "optimize": "an optimizing search"}
_KEYS_OF = {
    "breakdown": set(SearchConfig.__dataclass_fields__) | {"kind"},
    "optimize": set(OptimizeConfig.__dataclass_fields__),
}


def _search(
    stack: Stack, workload: WorkloadConfig, sweep: SweepConfig
) -> SearchConfig | OptimizeConfig | None:
    """[search], when a layer gave it, of its kind (a breakdown search unless it says
    otherwise): each kind's keys only, the required ones given."""
    given: dict[str, Any] | None = stack.tree.get("search")
    if given is None:
        return None
    kind = given.get("kind", "breakdown")
    required = _SEARCH_REQUIRED if kind == "breakdown" else _OPTIMIZE_REQUIRED
    for key in given:
        if key not in _KEYS_OF[kind]:
            raise ConfigError(
                f"{stack.origin(f'search.{key}')}: search.{key}: not a key of "
                f"{_SEARCH_NAMES[kind]} "
                f"(its keys: {', '.join(sorted(_KEYS_OF[kind]))}; configs/README.md)"
            )
    for key in required:
        if key not in given:
            raise ConfigError(
                f"{stack.origin('search')}: search.{key}: required for {_SEARCH_NAMES[kind]} "
                f"(its keys {', '.join(required)}; configs/README.md)"
            )
    if kind == "optimize":
        return _optimize(stack, workload, sweep, OptimizeConfig(**given))
    return _breakdown(
        stack, workload, sweep, SearchConfig(**{k: v for k, v in given.items() if k != "kind"})
    )


def _repetitions(stack: Stack, search: SearchConfig | OptimizeConfig) -> None:
    if search.repetitions > search.max_repetitions:
        key = "search.max_repetitions"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: {search.max_repetitions} is fewer than "
            f"search.repetitions ({search.repetitions})"
        )


def _columns_of(stack: Stack, kind: str, key: str, names: Sequence[str | None]) -> None:
    columns = [c.name for c in (*METRIC_COLUMNS, *workload_columns(kind))]
    for index, name in enumerate(names):
        if name is not None and name not in columns:
            at = f"search.{key}" + (f"[{index}]" if len(names) > 1 else "")
            raise ConfigError(
                f"{stack.origin(f'search.{key}')}: {at}: {name!r} is not a trials.csv "
                f"metric of workload {kind!r} (e.g. {', '.join(columns[-4:])})"
            )


def _optimize(
    stack: Stack, workload: WorkloadConfig, sweep: SweepConfig, search: OptimizeConfig
) -> OptimizeConfig:
    """The optimising search's space is the sweep's grid: some axis must offer a choice."""
    if not any(len(values) > 1 for _name, values in sweep.axes):
        raise ConfigError(
            f"{stack.origin('search')}: search: an optimizing search chooses among the values "
            "of [sweep]'s axes, and no axis has more than one"
        )
    if search.repetitions < 2:
        key = "search.repetitions"
        raise ConfigError(f"{stack.origin(key)}: {key}: at least 2, for an interval per point")
    _repetitions(stack, search)
    if search.budget < search.repetitions:
        key = "search.budget"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: {search.budget} trials is less than one round at a "
            f"point (search.repetitions = {search.repetitions})"
        )
    _columns_of(stack, workload.kind, "objectives", search.objectives)
    _columns_of(stack, workload.kind, "relative_to", [search.relative_to])
    return search


def _breakdown(
    stack: Stack, workload: WorkloadConfig, sweep: SweepConfig, search: SearchConfig
) -> SearchConfig:
    """Its parameter must be a numeric parameter of the workload outside the sweep's axes
    (which form the groups searched), its range inside the parameter's, its metrics trials.csv
    columns."""
    spec = SPECS[workload.kind]
    numeric = [p.name for p in spec.params if p.kind in ("int", "float")]
    if search.param not in numeric:
        key = "search.param"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: {search.param!r} is not a numeric parameter of "
            f"workload {spec.kind!r} (its numeric parameters: {', '.join(numeric) or 'none'})"
        )
    if search.param in sweep.names:
        key = f"sweep.{search.param}"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: the breakdown search sets {search.param} itself; "
            "take it out of [sweep] (the sweep's axes are the groups searched)"
        )
    param = spec.param(search.param)
    for end in ("low", "high"):
        key = f"search.{end}"
        value = getattr(search, end)
        try:
            param.check(int(value) if param.kind == "int" and value == int(value) else value)
        except ParamError as exc:
            raise ConfigError(f"{stack.origin(key)}: {key}: {exc.reason}") from None
    if search.low >= search.high:
        key = max(("search.low", "search.high"), key=lambda k: stack.layers.index(stack.origin(k)))
        raise ConfigError(
            f"{stack.origin(key)}: {key}: low ({search.low:g}) must be below high ({search.high:g})"
        )
    _repetitions(stack, search)
    for key in ("metric", "relative_to"):
        _columns_of(stack, spec.kind, key, [getattr(search, key)])
    return search


def _check_energy_window(stack: Stack, config: Config) -> None:
    """The process window needs the trial process's own start and end, which the controller
    sees for a local client node only (its anchor starts and reaps the process)."""
    if config.energy.window == "process" and not config.client.is_local:
        key = "energy.window"
        raise ConfigError(
            f'{stack.origin(key)}: {key}: "process" needs a local client node (the controller '
            'times the trial process through the node\'s anchor); use "fetch" for SSH nodes'
        )


def _check_idle_baseline(stack: Stack, config: Config) -> None:
    """The baseline is judged in fifths of two samples or more: a shorter one cannot be."""
    samples = config.run.idle_baseline_s * config.meter.rate_hz
    if samples < IDLE_MIN_SAMPLES:
        key = "run.idle_baseline_s"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: {config.run.idle_baseline_s:g} s at meter.rate_hz = "
            f"{config.meter.rate_hz} is {samples:g} samples; the idle baseline needs "
            f"{IDLE_MIN_SAMPLES} at least ({IDLE_MIN_SAMPLES / config.meter.rate_hz:g} s)"
        )


def _check_agent_mode(stack: Stack, config: Config) -> None:
    """A warm agent outlives its trials, so the process window would integrate nothing but
    the trial's handling inside it."""
    if config.run.agent != "warm":
        return
    key = "run.agent"
    if config.energy.window == "process":
        raise ConfigError(
            f'{stack.origin(key)}: {key}: "warm" keeps one agent process for the sweep, so '
            'energy.window = "process" (each trial process\'s whole life) would measure no '
            'process: use "fresh" with it, or energy.window = "fetch"'
        )


def _check_event_loop(stack: Stack, config: Config) -> None:
    """The event loop is the h2 engine's: nghttp2's client is nghttp, a C program."""
    if config.run.event_loop == "asyncio":
        return
    for node in config.client_nodes:
        if node.engine == "nghttp2":
            key = "run.event_loop"
            raise ConfigError(
                f'{stack.origin(key)}: {key}: "{config.run.event_loop}" is the h2 engine\'s '
                f"event loop; the client node {node.name or 'nodes.client'} runs nghttp2 (nghttp, "
                "no Python loop)"
            )


def _check_protocol(stack: Stack, config: Config) -> None:
    """TLS trials put the run's authority on the client node; several client nodes would each
    need it where their own state lives, which the sweep does not yet do. HTTP/3 trials run on
    the agent's own engine, for a workload that runs over it, announcing only settings with an
    HTTP/3 counterpart (agent.h3.settings)."""
    key = f"sweep.{PROTOCOL_AXIS}" if PROTOCOL_AXIS in config.sweep.names else "workload.protocol"
    origin = stack.origin(key)
    datagram = (
        f"sweep.{DATAGRAM_AXIS}"
        if DATAGRAM_AXIS in config.sweep.names
        else "workload.datagram_bytes"
    )
    if (DATAGRAM_AXIS in config.sweep.names or config.workload.datagram_bytes is not None) and (
        config.protocols != ("h3",)
    ):
        raise ConfigError(
            f"{stack.origin(datagram)}: {datagram}: HTTP/3's datagram size, in a run whose "
            f'protocols are {", ".join(config.protocols)}: use it in a run of "h3" alone'
        )
    if config.protocols != ("h2c",) and len(config.client_nodes) > 1:
        encrypted = next(p for p in config.protocols if p != "h2c")
        raise ConfigError(
            f'{origin}: {key}: "{encrypted}" (TLS) runs with one client node; nodes.clients '
            f"lists {len(config.client_nodes)}"
        )
    if "h3" not in config.protocols:
        return
    spec = SPECS[config.workload.kind]
    if "h3" not in spec.protocols:
        raise ConfigError(
            f'{origin}: {key}: the {spec.kind} workload does not run over "h3" (it runs over '
            f"{', '.join(spec.protocols)})"
        )
    servers = [server for _key, server in _servers(config)]
    for node in (*config.client_nodes, *servers):
        if "h3" not in ENGINE_SPECS[node.engine].protocols:
            runs = " or ".join(f'"{e}"' for e, s in ENGINE_SPECS.items() if "h3" in s.protocols)
            raise ConfigError(
                f'{origin}: {key}: "h3" runs on engine {runs}, not '
                f'nodes.{node.role}.engine = "{node.engine}"'
            )
    if config.client.engine == "nghttp2" and any(s.engine != "nghttp2" for s in servers):
        # gtlsclient sends no trial header: only the engine's own server counts its trials.
        raise ConfigError(
            f'{origin}: {key}: "h3" on the client\'s "nghttp2" engine (ngtcp2\'s gtlsclient) '
            'needs the server on "nghttp2" too (gtlsserver, whose agent counts its trials)'
        )
    policies = dict(config.sweep.axes).get(
        "window_update_policy", (config.workload.window_update_policy,)
    )
    if any(policy != DEFAULT_WINDOW_UPDATE_POLICY for policy in policies):
        raise ConfigError(
            f'{origin}: {key}: window_update_policy is HTTP/2\'s; over "h3" the QUIC stack '
            f'grants credit its own way: keep "{DEFAULT_WINDOW_UPDATE_POLICY}"'
        )
    settings = tuple(name for name in config.sweep.names if name in SETTING_SPECS)
    try:
        refuse_without_counterpart(settings, "agent's")
        if any(node.engine == "nghttp2" for node in (*config.client_nodes, *servers)):
            refuse_without_counterpart(settings, "nghttp2 engine's (ngtcp2)", NGTCP2_SETTINGS)
    except SettingsError as exc:
        raise ConfigError(f"{origin}: {key}: {exc}") from None


def _servers(config: Config) -> list[tuple[str, NodeConfig]]:
    """The server node as each trial runs it, with the key that sets its engine: one, or one
    per value of a swept server_engine."""
    swept = dict(config.sweep.axes).get(SERVER_ENGINE_AXIS)
    if swept is None:
        return [("nodes.server.engine", config.server)]
    return [
        (f"sweep.{SERVER_ENGINE_AXIS}[{index}]", replace(config.server, engine=engine))
        for index, engine in enumerate(e for value in swept for e in ENGINES if e == value)
    ]


def _check_kind_engine(stack: Stack, config: Config) -> None:
    spec = SPECS[config.workload.kind]
    for node in config.client_nodes:
        if node.engine in SERVER_ONLY_ENGINES:
            key = f"nodes.{node.role}.engine"
            raise ConfigError(
                f"{stack.origin(key)}: {key}: {node.engine!r} only serves; a client runs "
                '"h2" or "nghttp2"'
            )
    nodes = [(f"nodes.{node.role}.engine", node) for node in config.client_nodes]
    for key, node in nodes + _servers(config):
        if node.engine not in spec.engines:
            origin = stack.origin(key.split("[", 1)[0])
            raise ConfigError(
                f"{origin}: {key}: workload {spec.kind!r} runs on "
                f"{' or '.join(repr(e) for e in spec.engines)}, not {node.engine!r}"
            )


def _check_announced(stack: Stack, config: Config) -> None:
    """A swept setting that a node's engine has no option to announce (agent.engines)."""
    nodes = [(f"nodes.{node.role}.engine", node) for node in config.client_nodes]
    for key, node in nodes + _servers(config):
        client = node.role == "client"
        spec = ENGINE_SPECS[node.engine]
        supported = spec.settings(client)
        if supported is None:
            continue
        for name in config.sweep.names:
            if name in SETTING_SPECS and name not in supported:
                axis = f"sweep.{name}"
                raise ConfigError(
                    f"{stack.origin(axis)}: {axis}: {spec.tool(client)} has no option to "
                    f'announce it ({key} = "{node.engine}"; it announces '
                    f'{", ".join(supported)}); sweep it with engine "h2"'
                )


def _check_engines(stack: Stack, config: Config) -> None:
    """What nghttp, nghttpd or hypercorn cannot run is refused before the sweep starts, naming
    the node."""
    _check_kind_engine(stack, config)
    _check_announced(stack, config)
    for node in (*config.client_nodes, *(server for _key, server in _servers(config))):
        spec = ENGINE_SPECS[node.engine]
        engine = f'nodes.{node.role}.engine = "{node.engine}"'
        allowed = spec.client_window_update_policies
        policies = dict(config.sweep.axes).get(
            "window_update_policy", (config.workload.window_update_policy,)
        )
        for policy in policies:
            if node.role == "client" and allowed is not None and policy not in allowed:
                key = (
                    "sweep.window_update_policy"
                    if "window_update_policy" in config.sweep.names
                    else "workload.window_update_policy"
                )
                raise ConfigError(
                    f"{stack.origin(key)}: {key}: {node.engine} updates windows by "
                    f'{" or ".join(f"{p!r}" for p in allowed)} only, not "{policy}" ({engine})'
                )
        if not spec.windows_are_powers_of_two_less_one:
            continue
        if config.workload.unrepresentable_window == "reject":
            _check_windows(stack, config, spec, engine, node.role == "client")


def _check_windows(
    stack: Stack, config: Config, spec: EngineSpec, engine: str, client: bool
) -> None:
    # Only nghttp and nghttpd take 2^N - 1: at h3 points the engine runs ngtcp2's tools,
    # which take any window exactly (agent.nghttp2.gtls).
    http2 = [p for p in config.protocols if p != "h3"]
    if not http2:
        return
    where = engine
    if len(http2) < len(config.protocols):
        where = f"at protocol {' and '.join(http2)}, {engine}; at h3 it takes any window"
    windows = dict(config.sweep.axes).get("initial_window_size", ())
    for index, window in enumerate(windows):
        _check_window(stack, f"sweep.initial_window_size[{index}]", int(window), spec, where)
    if not client:
        return
    swept = dict(config.sweep.axes).get("connection_window")
    if swept is not None:
        for index, window in enumerate(swept):
            if window is not None:
                _check_window(stack, f"sweep.connection_window[{index}]", int(window), spec, where)
    elif config.workload.connection_window is not None:
        _check_window(
            stack, "workload.connection_window", config.workload.connection_window, spec, where
        )


def _check_window(stack: Stack, key: str, window: int, spec: EngineSpec, where: str) -> None:
    on_wire = spec.window_on_wire(window)
    if on_wire == window:
        return
    setting = "workload.unrepresentable_window"
    raise ConfigError(
        f"{stack.origin(setting)}: {key}: {window} is not 2^N - 1 bytes, which nghttp2 needs "
        f'({where}); the nearest is {on_wire}: use it, or set {setting} = "map" to run '
        "the nearest in its place"
    )
