"""From the merged tree to a `Config`: node defaults that depend on the transport, and the checks
that relate keys to each other (each blames the layer that set the deciding key).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from agent.h2.settings import SETTING_SPECS
from agent.workloads import SPECS, ParamError
from analysis.trial_columns import METRIC_COLUMNS, PHASE_COLUMNS, workload_columns
from controller.config.channels import (
    INA219_RATE_MAX_HZ,
    INA226_RATE_MAX_HZ,
    channel_label,
    channel_source,
    is_ina219,
    is_ina226,
)
from controller.config.clients import check_clients
from controller.config.engine_checks import check_engines, check_protocols
from controller.config.layers import KeyPath, Stack
from controller.config.model import (
    IDLE_MIN_SAMPLES,
    LOCAL_HOST,
    ROLES,
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
            "source with the other node's channel (An, INA219@0x40+n and INA226@0x40+n follow "
            "the same source): use another input or address"
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
    if meter.spec.config_check is not None:
        meter.spec.load(meter.spec.config_check)(stack, meter)
    return meter


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
    check_engines(stack, config)
    _check_energy_window(stack, config)
    _check_agent_mode(stack, config)
    _check_idle_baseline(stack, config)
    _check_trial_timeout(stack, config)
    check_protocols(stack, config)
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
    columns = [c.name for c in (*METRIC_COLUMNS, *PHASE_COLUMNS, *workload_columns(kind))]
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


def _check_trial_timeout(stack: Stack, config: Config) -> None:
    """A trial still scheduling its work when its timeout strikes (a periodic trial's last
    exchange) would fail at every attempt: said at load, not after the sweep's first hour."""
    spec = SPECS[config.workload.kind]
    if spec.schedule is None:
        return
    longest_s = max(spec.schedule_s(dict(config.point(p).params)) for p in config.sweep.points())
    if config.run.trial_timeout_s <= longest_s:
        key = "run.trial_timeout_s"
        raise ConfigError(
            f"{stack.origin(key)}: {key}: {config.run.trial_timeout_s:g} s ends a trial while "
            f"the {config.workload.kind} workload still schedules its work (up to "
            f"{longest_s:g} s after its start, by its params); raise it above that"
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
