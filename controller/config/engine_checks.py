"""What a run's engines and protocols cannot do, refused at load with the key at fault: each
rule a question to the engine's or the protocol's declaration (agent.engines, agent.protocols),
never an engine's or a protocol's name."""

from __future__ import annotations

from dataclasses import replace

from agent.engines import EngineSpec, engine_spec, engines_where
from agent.errors import SettingsError
from agent.h2.flow import DEFAULT_WINDOW_UPDATE_POLICY
from agent.h2.settings import SETTING_SPECS
from agent.h3.settings import refuse_without_counterpart
from agent.protocols import protocol_spec, protocols_where
from agent.workloads import SPECS
from controller.config.layers import Stack
from controller.config.model import (
    ACK_AXES,
    DATAGRAM_AXIS,
    PROTOCOL_AXIS,
    SERVER_ENGINE_AXIS,
    Config,
    NodeConfig,
)
from controller.errors import ConfigError


def check_protocols(stack: Stack, config: Config) -> None:
    """The agents' event loops and the run's protocols, against the nodes' engines."""
    _check_event_loop(stack, config)
    _check_protocol(stack, config)
    _check_events(stack, config)


def _quoted_or(names: tuple[str, ...]) -> str:
    return " or ".join(f'"{name}"' for name in names)


def _check_event_loop(stack: Stack, config: Config) -> None:
    """The event loops are the agent's own engine's: another engine's client or server runs no
    Python (a swept server_engine: each of its values)."""
    if config.run.event_loop != "asyncio":
        for node in config.client_nodes:
            if not engine_spec(node.engine).event_loop:
                key = "run.event_loop"
                raise ConfigError(
                    f'{stack.origin(key)}: {key}: "{config.run.event_loop}" is the '
                    f"{' or '.join(_with_event_loop())} engine's event loop; the client "
                    f"node {node.name or 'nodes.client'} runs {node.engine} "
                    f"({engine_spec(node.engine).client_tool}, no Python loop)"
                )
    if config.run.server_event_loop != "asyncio":
        for where, node in _servers(config):
            if not engine_spec(node.engine).event_loop:
                key = "run.server_event_loop"
                raise ConfigError(
                    f'{stack.origin(key)}: {key}: "{config.run.server_event_loop}" is the '
                    f"{' or '.join(_with_event_loop())} engine's event loop; the server "
                    f"runs {node.engine} ({where}), whose "
                    f"{engine_spec(node.engine).server_tool} does not run on the agent's loop"
                )


def _check_events(stack: Stack, config: Config) -> None:
    """Event traces come from one client node whose engine writes them (agent/README.md, Event
    traces); several client nodes' traces are not fetched yet."""
    if not config.run.events:
        return
    key = "run.events"
    if config.clients:
        raise ConfigError(
            f"{stack.origin(key)}: {key}: traces come from one client node; "
            "this run has nodes.clients"
        )
    engine = engine_spec(config.client.engine)
    untraced = [p for p in config.protocols if p not in engine.client_traces]
    if untraced:
        raise ConfigError(
            f"{stack.origin(key)}: {key}: the client's engine {engine.name} writes no event "
            f"trace over {untraced[0]} yet"
        )


def _with_event_loop() -> tuple[str, ...]:
    return tuple(e for e in engines_where(client=True) if engine_spec(e).event_loop)


def _check_protocol(stack: Stack, config: Config) -> None:
    """TLS trials put the run's authority on the client node; several client nodes would each
    need it where their own state lives, which the sweep does not yet do. QUIC trials run on
    engines that run them, for a workload that runs over them, announcing only settings with a
    QUIC counterpart (agent.h3.settings)."""
    key = f"sweep.{PROTOCOL_AXIS}" if PROTOCOL_AXIS in config.sweep.names else "workload.protocol"
    origin = stack.origin(key)
    datagram = (
        f"sweep.{DATAGRAM_AXIS}"
        if DATAGRAM_AXIS in config.sweep.names
        else "workload.datagram_bytes"
    )
    quic = tuple(p for p in config.protocols if protocol_spec(p).quic)
    if (DATAGRAM_AXIS in config.sweep.names or config.workload.datagram_bytes is not None) and (
        quic != config.protocols
    ):
        raise ConfigError(
            f"{stack.origin(datagram)}: {datagram}: HTTP/3's datagram size, in a run whose "
            f"protocols are {', '.join(config.protocols)}: use it in a run of "
            f"{_quoted_or(protocols_where(quic=True))} alone"
        )
    _check_ack_policy(stack, config, quic)
    _check_refusals(stack, config)
    encrypted = [p for p in config.protocols if protocol_spec(p).tls]
    if encrypted and len(config.client_nodes) > 1:
        raise ConfigError(
            f'{origin}: {key}: "{encrypted[0]}" (TLS) runs with one client node; nodes.clients '
            f"lists {len(config.client_nodes)}"
        )
    spec = SPECS[config.workload.kind]
    servers = [server for _key, server in _servers(config)]
    for protocol in config.protocols:
        if not spec.runs_protocol(protocol):
            raise ConfigError(
                f'{origin}: {key}: the {spec.kind} workload does not run over "{protocol}" (it '
                f"runs over {', '.join(spec.protocols)})"
            )
        for node in (*config.client_nodes, *servers):
            if not engine_spec(node.engine).runs_protocol(protocol):
                raise ConfigError(
                    f'{origin}: {key}: "{protocol}" runs on engine '
                    f"{_quoted_or(engines_where(protocol=protocol))}, not "
                    f'nodes.{node.role}.engine = "{node.engine}"'
                )
    if not quic:
        return
    _check_control_counting(f"{origin}: {key}", quic[0], config)
    policies = dict(config.sweep.axes).get(
        "window_update_policy", (config.workload.window_update_policy,)
    )
    if any(policy != DEFAULT_WINDOW_UPDATE_POLICY for policy in policies):
        raise ConfigError(
            f'{origin}: {key}: window_update_policy is HTTP/2\'s; over "{quic[0]}" the QUIC '
            f'stack grants credit its own way: keep "{DEFAULT_WINDOW_UPDATE_POLICY}"'
        )
    settings = tuple(name for name in config.sweep.names if name in SETTING_SPECS)
    try:
        refuse_without_counterpart(settings, "agent's")
        for node in (*config.client_nodes, *servers):
            engine = engine_spec(node.engine)
            announced = engine.quic_settings
            if announced is not None:
                refuse_without_counterpart(
                    settings, f"{engine.name} engine's ({engine.quic_stack})", announced
                )
    except SettingsError as exc:
        raise ConfigError(f"{origin}: {key}: {exc}") from None


def _check_control_counting(where: str, protocol: str, config: Config) -> None:
    """A client engine that sends no trial header over QUIC brackets its trials by control
    messages: every server must take them. (They tell one client's trials apart only: QUIC
    runs with one client node, as every protocol over TLS.)"""
    client = engine_spec(config.client.engine)
    if not client.quic_client_counted_by_control:
        return
    tool = client.quic_tools[0] if client.quic_tools else client.tool(True)
    said = (
        f'{where}: "{protocol}" on the client\'s "{client.name}" engine ({client.quic_stack}\'s '
        f"{tool}) brackets its trials by trial-control messages"
    )
    for server_key, server in _servers(config):
        if not engine_spec(server.engine).takes_trial_control:
            raise ConfigError(f'{said}, which {server_key} = "{server.engine}" does not take')


def _check_refusals(stack: Stack, config: Config) -> None:
    """No grid point pairs a workload param's value with a protocol its workload, or a client
    node's engine, refuses it over (agent.workloads.Refusal: the periodic workload's resume
    over h2c; EngineSpec.client_refusals: nghttp's keep)."""
    spec = SPECS[config.workload.kind]
    for point in config.sweep.points():
        trial = config.point(point)
        params = dict(trial.params)
        refused = spec.refusal(params, trial.protocol)
        engine = ""
        for node in config.client_nodes:
            if refused is None:
                refused = engine_spec(node.engine).client_refusal(spec.kind, params, trial.protocol)
                engine = f' (nodes.{node.role}.engine = "{node.engine}")'
        if refused is not None:
            name = refused.param
            key = f"sweep.{name}" if name in config.sweep.names else f"workload.{name}"
            raise ConfigError(
                f"{stack.origin(key)}: {key}: {refused.message(trial.protocol)}{engine}"
            )


def _check_ack_policy(stack: Stack, config: Config, quic: tuple[str, ...]) -> None:
    """The client's ACK policy (model.ACK_AXES) is HTTP/3's receiver's: a run of QUIC protocols
    alone, on client engines whose client takes one."""
    for name in ACK_AXES:
        swept = name in config.sweep.names
        if not swept and getattr(config.workload, name) is None:
            continue
        key = f"sweep.{name}" if swept else f"workload.{name}"
        if quic != config.protocols:
            raise ConfigError(
                f"{stack.origin(key)}: {key}: HTTP/3's client's ACK policy, in a run whose "
                f"protocols are {', '.join(config.protocols)}: use it in a run of "
                f"{_quoted_or(protocols_where(quic=True))} alone"
            )
        for node in config.client_nodes:
            if not engine_spec(node.engine).quic_ack_policy:
                takes = tuple(e for e in engines_where() if engine_spec(e).quic_ack_policy)
                raise ConfigError(
                    f'{stack.origin(key)}: {key}: the "{node.engine}" engine\'s client has no '
                    f"ACK policy (nodes.{node.role}.engine); use engine {_quoted_or(takes)}"
                )


def _servers(config: Config) -> list[tuple[str, NodeConfig]]:
    """The server node as each trial runs it, with the key that sets its engine: one, or one
    per value of a swept server_engine."""
    swept = dict(config.sweep.axes).get(SERVER_ENGINE_AXIS)
    if swept is None:
        return [("nodes.server.engine", config.server)]
    return [
        (f"sweep.{SERVER_ENGINE_AXIS}[{index}]", replace(config.server, engine=str(engine)))
        for index, engine in enumerate(swept)
    ]


def _check_kind_engine(stack: Stack, config: Config) -> None:
    spec = SPECS[config.workload.kind]
    for node in config.client_nodes:
        if engine_spec(node.engine).serves_only:
            key = f"nodes.{node.role}.engine"
            raise ConfigError(
                f"{stack.origin(key)}: {key}: {node.engine!r} only serves; a client runs "
                f"{_quoted_or(engines_where(client=True))}"
            )
    nodes = [(f"nodes.{node.role}.engine", node, True) for node in config.client_nodes]
    servers = [(key, node, False) for key, node in _servers(config)]
    for key, node, client in nodes + servers:
        if not engine_spec(node.engine).runs_workload(spec.kind, client=client):
            origin = stack.origin(key.split("[", 1)[0])
            where = engines_where(workload=spec.kind, client=client or None)
            runs = " or ".join(repr(e) for e in where)
            raise ConfigError(
                f"{origin}: {key}: workload {spec.kind!r} runs on {runs}, not {node.engine!r}"
            )


def _check_announced(stack: Stack, config: Config) -> None:
    """A swept setting that a node's engine has no option to announce (agent.engines)."""
    nodes = [(f"nodes.{node.role}.engine", node) for node in config.client_nodes]
    for key, node in nodes + _servers(config):
        client = node.role == "client"
        spec = engine_spec(node.engine)
        supported = spec.settings(client)
        if supported is None:
            continue
        for name in config.sweep.names:
            if name in SETTING_SPECS and name not in supported:
                axis = f"sweep.{name}"
                every = _quoted_or(
                    tuple(e for e in engines_where() if engine_spec(e).settings(client) is None)
                )
                raise ConfigError(
                    f"{stack.origin(axis)}: {axis}: {spec.tool(client)} has no option to "
                    f'announce it ({key} = "{node.engine}"; it announces '
                    f"{', '.join(supported) or 'none'}); sweep it with engine {every}"
                )


def check_engines(stack: Stack, config: Config) -> None:
    """What an engine's programs cannot run is refused before the sweep starts, naming the
    node."""
    _check_kind_engine(stack, config)
    _check_announced(stack, config)
    for node in (*config.client_nodes, *(server for _key, server in _servers(config))):
        spec = engine_spec(node.engine)
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
        if spec.window_map is None:
            continue
        if config.workload.unrepresentable_window == "reject":
            _check_windows(stack, config, spec, engine, node.role == "client")


def _check_windows(
    stack: Stack, config: Config, spec: EngineSpec, engine: str, client: bool
) -> None:
    # The engine maps windows over TCP only: over QUIC its tools take any window exactly.
    tcp = [p for p in config.protocols if not protocol_spec(p).quic]
    if not tcp:
        return
    where = engine
    if len(tcp) < len(config.protocols):
        over_quic = " and ".join(p for p in config.protocols if p not in tcp)
        where = f"at protocol {' and '.join(tcp)}, {engine}; at {over_quic} it takes any window"
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
        f"{stack.origin(setting)}: {key}: {window} is not 2^N - 1 bytes, which {spec.name} "
        f'needs ({where}); the nearest is {on_wire}: use it, or set {setting} = "map" to run '
        "the nearest in its place"
    )
