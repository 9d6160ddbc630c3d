"""Open what a sweep runs on, from its config: the two agent nodes and the meter.

Local nodes are anchored process trees (`controller.nodes.anchor`) with their state under the
run directory; SSH nodes keep it under their deploy directory. The meter is what its source's
declaration says (controller/meter_sources/<name>/): a modelled one (the virtual meter, simavr,
the emulated PPK2) watches the local nodes' anchors (client on its analog input, server on its
own) and reads the client's software marker line, so trial windows are cut by edges as with a
wired board; the source's tap then reads the device's port.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agent import __version__
from agent.engines import engine_spec
from agent.protocols import protocol_spec
from controller.config.channels import (
    channel_source,
    is_ina219,
    is_ina226,
)
from controller.config.model import (
    Config,
    MeterConfig,
    NodeConfig,
    Role,
)
from controller.device.emulation import Emulation, emulated_devices
from controller.device.transport import CgroupTransport
from controller.errors import ConfigError, DeviceError, MeterError
from controller.link import shaped_link
from controller.meter.ina219 import Ina219Calibration, Ina219Model
from controller.meter.modelled_device import DeviceOptions, build_device, manifest_facts
from controller.meter.net_load import InterfaceCounters
from controller.meter.node_power import WatchSpec
from controller.meter.power_model import PI_3B, PowerModel
from controller.nodes.agent import AgentNode
from controller.nodes.anchor import AnchoredLocalTransport
from controller.nodes.connect import connect, node_label
from controller.nodes.facts import inspect_node
from controller.nodes.node import Node
from controller.run.tls import KEY_KIND, TLS_DIR, run_credentials
from controller.sweep.agent_pair import AgentPair, NodeCredentials
from controller.sweep.client_group import client_group, grouped_server
from controller.sweep.memory_pair import make_pair
from controller.sweep.meter_tap import Tap, TapRequest, open_tap
from controller.workloads import prepare_sweep, preparer

MARKER_FIFO = "marker.fifo"


def open_node(
    config: NodeConfig, *, accept_new_host_key: bool, devices: Emulation | None = None
) -> tuple[Node, int | None]:
    """A connected node, and the pid of its anchor when it is local (in its emulated device's
    cgroup and namespace, if it has them)."""
    if config.is_local:
        label = node_label(config)
        transport = (
            devices.start_anchor(config.role, label) if devices else AnchoredLocalTransport(label)
        )
        anchor = transport.inner if isinstance(transport, CgroupTransport) else transport
        return Node(transport), anchor.pid
    return connect(config, accept_new_host_key=accept_new_host_key), None


def _state_dir(config: NodeConfig, run_dir: Path) -> str:
    if config.is_local:
        return str((run_dir / "nodes" / config.role).resolve())
    return f"{config.deploy_dir}/state"


SourceError = Callable[[], MeterError | None]
"""Why a modelled meter's driver stopped, when it failed."""


def _require_port(config: Config) -> None:
    """A serial meter's port must exist: a missing one is the config's mistake (exit 2), named
    with the layer that set it, before any node or process is started."""
    meter = config.meter
    if meter.modelled or meter.port is None:  # a serial meter has one (build.py)
        return
    layer = dict(config.origins).get("meter.port", config.source)
    if not os.path.exists(meter.port):
        raise ConfigError(f"{layer}: meter.port: {meter.port}: no such device")


def _model(meter: MeterConfig) -> PowerModel:
    """The modelled meters' Pi 3B model, with the config's network term."""
    return replace(PI_3B, network_nj_per_byte=meter.network_nj_per_byte)


def _i2c_sources(meter: MeterConfig, kind: Callable[[int], bool]) -> tuple[int, ...]:
    """The sources the meter's channels of one I2C kind follow, in order."""
    return tuple(sorted(channel_source(c) for _role, c in meter.channels if kind(c)))


def device_options(
    meter: MeterConfig,
    watch: tuple[WatchSpec, ...],
    marker: Path | None,
    run_dir: Path | None = None,
) -> DeviceOptions:
    """What the config's modelled meter is built from: the nodes it follows, the marker's
    FIFO, and the parts its channels name (a simavr board's INA219s and INA226s), as a sweep
    and a rig check alike build it; `run_dir` None writes no ground truth."""
    return DeviceOptions(
        watch=watch,
        marker_fifo=marker,
        run_dir=run_dir,
        model=_model(meter),
        ina219=Ina219Model(Ina219Calibration(shunt_ohm=meter.shunt_ohm)),
        ina219_sources=_i2c_sources(meter, is_ina219),
        ina226_sources=_i2c_sources(meter, is_ina226),
        # The current the model's mW make at the voltage the tap multiplies it back with.
        supply_mv=round(meter.power_v * 1000),
        marker_input=meter.marker_input,
        rate_hz=meter.rate_hz,
    )


@contextmanager
def _device(
    meter: MeterConfig, watch: tuple[WatchSpec, ...], run_dir: Path, marker: Path | None
) -> Iterator[tuple[str | None, dict[str, Any], SourceError | None]]:
    """The serial device to open: a board's port, or a modelled meter running meanwhile (on
    a thread whose error, should it stop, the third item returns; None for a board: its port
    says all there is). A modelled source declaring no device gets its port (None, unset):
    its tap is all of it."""
    spec = meter.spec
    if not meter.modelled or spec.device is None:
        if spec.needs_port and meter.port is None:
            raise ConfigError(f"meter.port: required for meter.source = {meter.source}")
        yield meter.port, {}, None
        return
    options = device_options(meter, watch, marker, run_dir)
    modelled = build_device(spec, options)
    facts = manifest_facts(spec, options)
    modelled.start()
    try:
        yield modelled.port, facts, lambda: modelled.error
    finally:
        modelled.stop()
        modelled.close()


@contextmanager
def open_sweep(
    config: Config, run_dir: Path, *, accept_new_host_key: bool = False
) -> Iterator[tuple[AgentPair, Tap, dict[str, Any]]]:
    """Nodes (the server prepared for every point of the workload: the page's sites) and the
    meter, closed on exit; plus the facts a run's manifest records about them."""
    _require_port(config)
    with ExitStack() as stack:
        devices = stack.enter_context(emulated_devices(config, run_dir))
        config = devices.config  # on the emulated devices' own data link, if they have one
        client_node, client_anchor = open_node(
            config.client, accept_new_host_key=accept_new_host_key, devices=devices
        )
        stack.callback(client_node.close)
        server_node, server_anchor = open_node(
            config.server, accept_new_host_key=accept_new_host_key, devices=devices
        )
        stack.callback(server_node.close)
        facts: dict[str, Any] = {}
        for role, node, node_config in (
            ("client", client_node, config.client),
            ("server", server_node, config.server),
        ):
            found = inspect_node(
                node,
                node_config,
                expected_version=__version__,
                clock_samples=100,
                protocols=config.protocols,
            )
            if found.problems:
                raise DeviceError(found.problems[0])
            facts[role] = {**asdict(found), "cpu_pin": node_config.cpu}
        # An SSH node's device (remote_device) once the node is known to be deployed; its cgroup
        # is removed before the node is closed.
        client_node = devices.attach(client_node, config.client, _state_dir(config.client, run_dir))
        stack.callback(devices.detach, "client")
        server_node = devices.attach(server_node, config.server, _state_dir(config.server, run_dir))
        stack.callback(devices.detach, "server")
        link = stack.enter_context(
            shaped_link(config, {"client": client_node, "server": server_node})
        )
        device = devices.facts(
            {"client": client_node, "server": server_node},
            {"client": config.client.python, "server": config.server.python},
        )
        trial_log = f"{_state_dir(config.server, run_dir)}/trials-{run_dir.name}.jsonl"
        client = AgentNode(
            client_node, config.client.python, _state_dir(config.client, run_dir), config.client.cpu
        )
        # nodes.clients: the other client nodes join the first as one group.
        client = client_group(
            config, client, facts, stack, run_dir, accept_new_host_key=accept_new_host_key
        )
        server = AgentNode(
            server_node,
            config.server.python,
            _state_dir(config.server, run_dir),
            config.server.cpu,
            trial_log=trial_log,
        )
        server = grouped_server(client, server)
        prepare = preparer(
            config.workload.kind,
            server,
            _state_dir(config.server, run_dir),
            client_shares_host=all(c.host == config.server.host for c in config.client_nodes),
        )
        prepare_sweep(config, prepare)
        tls = _deploy_credentials(config, run_dir, client, server)
        modelled = config.meter.modelled
        marker_path = (
            (run_dir / MARKER_FIFO).resolve() if modelled and config.client.is_local else None
        )
        watch = _watch(config, client_anchor, server_anchor, devices) if modelled else ()
        port, device_facts, source_error = stack.enter_context(
            _device(config.meter, watch, run_dir, marker_path)
        )
        if modelled:
            device_facts["accounting"] = devices.accounting_facts(_watched_roles(config))
        tap = open_tap(
            TapRequest(config.meter, port, device_facts, source_error, marker_fifo=marker_path)
        )
        stack.callback(tap.close)
        offset = facts["client"]["clock"]["wall_offset_ns"] if facts["client"]["clock"] else 0
        pair = make_pair(
            devices,
            config,
            client,
            server,
            prepare=prepare,
            marker=f"fifo:{marker_path}" if marker_path is not None else config.client.marker,
            client_offset_ns=int(offset),
            facts=facts,
            client_traffic=(
                None
                if client_anchor is None
                else InterfaceCounters(devices.interface("client"), client_anchor).read
            ),
            tls=tls,
        )
        stack.callback(_stop_server, pair)
        facts["peer_clock"] = None if pair.peer_clock is None else asdict(pair.peer_clock)
        yield (
            pair,
            tap,
            {
                "nodes": facts,
                "meter": tap.facts(),
                "link": link,
                "device": device,
                "tls": None if tls is None else tls_facts(config),
            },
        )


def _deploy_credentials(
    config: Config, run_dir: Path, client: AgentNode, server: AgentNode
) -> NodeCredentials | None:
    """For a run with TLS trials, its credentials (controller.run.tls) on the nodes: the
    server's certificate and key (0600) in the server's state directory, the authority in the
    client's. The certificate names the address the client connects to (and the server's)."""
    if not any(protocol_spec(p).tls for p in config.protocols):
        return None
    wildcard = ("0.0.0.0", "::")
    addresses = (config.client.address, config.server.address)
    names = tuple(dict.fromkeys(a for a in addresses if a not in wildcard))
    made = run_credentials(run_dir, names, run_dir.name)
    cert = server.node.put_file(made.server_cert, f"{server.state_dir}/tls/server.pem")
    key = server.node.put_file(made.server_key, f"{server.state_dir}/tls/server.key")
    server.node.run(["chmod", "600", key])
    ca_file = client.node.put_file(made.ca_cert, f"{client.state_dir}/tls/ca.pem")
    return NodeCredentials(cert, key, ca_file)


def tls_facts(config: Config) -> dict[str, Any]:
    """What the manifest says of a run's TLS (its files are under the run's tls/)."""
    return {
        "protocols": list(config.protocols),
        "certificate": f"{TLS_DIR}/server.pem",
        "authority": f"{TLS_DIR}/ca.pem",
        "key": KEY_KIND,
        "client_checks_certificate": engine_spec(config.client.engine).checks_certificates,
    }


def _stop_server(pair: AgentPair) -> None:
    with contextlib.suppress(DeviceError):
        pair.server.stop_server()


def _watch(
    config: Config, client_pid: int | None, server_pid: int | None, devices: Emulation
) -> tuple[WatchSpec, ...]:
    """One source per analog input, in input order, for the modelled meters (the INA219 at
    0x40 + n follows source n, as analog input n does)."""
    pids = {"client": client_pid, "server": server_pid}
    by_input = dict((channel_source(index), role) for role, index in config.meter.channels)
    top = max(by_input, default=-1)
    specs = []
    for analog_input in range(top + 1):
        role = by_input.get(analog_input)
        pid = pids.get(role) if role is not None else None
        if role is None or pid is None:
            raise ConfigError(
                f"meter.channels: analog input A{analog_input} has no local node to model "
                "(a modelled meter follows local nodes only)"
            )
        specs.append(devices.watch(role, pid))
    return tuple(specs)


def _watched_roles(config: Config) -> tuple[Role, ...]:
    """The nodes a modelled meter follows, in the order of the sources it models."""
    return tuple(
        role for role, _c in sorted(config.meter.channels, key=lambda c: channel_source(c[1]))
    )
