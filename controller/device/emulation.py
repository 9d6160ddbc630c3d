"""A sweep's nodes as constrained devices: what `open_sweep` asks of this package.

`emulated_devices(config)` (a context manager) prepares, for the length of a sweep:
- for a modelled meter, an accounting-only cgroup per local node without a device profile,
  where this process may make one (`controller.device.accounting`): the meter reads the node's
  exact CPU time from it;
- a cgroup per local node with `nodes.<role>.device` (CPU quota, pinning, memory limit), which
  every command of the node joins before it starts (`controller.device.transport`), so the agent
  and the nghttp2 tools, and all they start, are in it;
- when both nodes are local and either has a device profile (and neither names a
  data_interface of its own), a network namespace per node joined by a veth data link
  (`controller.device.netns`); the sweep then runs on a copy of the config whose addresses and
  data interfaces are that link's, and `[link]` shapes it. (`device = "custom"` limits nothing:
  namespaces and a shaped link for unthrottled nodes.) With `link.delay_method = "relay"` the
  link runs through a third namespace whose relay delays every frame (`controller.device.wire`).

An SSH node with a device and `remote_device = true` gets its cgroup on its own host once it is
connected (`Emulation.attach`, `controller.device.remote`), calibrated against that host's core.
All of it needs root: here for local nodes, on the node's host for SSH nodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.config.model import ROLES, Config, NodeConfig, Role
from controller.config.profile import PI3B_CORE_FRACTION, DeviceProfile, pinned_cores
from controller.device.accounting import Accounting, accounting_cgroups
from controller.device.calibrate import Calibration, ProbeRun, calibrate, run_probe
from controller.device.cgroup import NodeCgroup
from controller.device.errors import EmulationError
from controller.device.netns import DATA_INTERFACE, LocalLink, create_link, destroy_link, run_inside
from controller.device.oom import oom_reason
from controller.device.remote import RemoteCgroup, calibrate_on, probe_on, require_root
from controller.device.transport import CgroupTransport
from controller.device.wire import start_relay
from controller.errors import ConfigError, DeviceError
from controller.meter.net_load import LOOPBACK
from controller.meter.node_power import WatchSpec
from controller.nodes.anchor import AnchoredLocalTransport
from controller.nodes.node import Node

LOCAL_CONFIG = "configs/local.toml"
RELAY_STATS = "link-relay.json"
PROBE_SECONDS = 1.0


@dataclass
class Emulation:
    """What `emulated_devices` made; `config` is the one the sweep runs on."""

    config: Config
    link: LocalLink | None = None
    cgroups: dict[Role, NodeCgroup] = field(default_factory=dict)
    remote: dict[Role, RemoteCgroup] = field(default_factory=dict)  # SSH nodes' cgroups
    cpus: dict[Role, tuple[int, ...]] = field(default_factory=dict)
    calibrations: dict[Role, Calibration] = field(default_factory=dict)
    ready: bool = False  # set up for trials (`start_trials`): trials report their own OOMs
    # Local nodes without a profile, for a modelled meter: their accounting-only cgroups.
    accounting: Accounting = field(default_factory=lambda: Accounting({}, {}))

    def start_anchor(
        self, role: Role, label: str
    ) -> AnchoredLocalTransport | CgroupTransport[AnchoredLocalTransport]:
        """A local node's anchor inside the node's namespace; its commands join the cgroup."""

        def start() -> AnchoredLocalTransport:
            return AnchoredLocalTransport(label)

        link = self.link
        anchor = start() if link is None else run_inside(link.namespace(role), start)
        cgroup = self.cgroups.get(role) or self.accounting.cgroups.get(role)
        return anchor if cgroup is None else CgroupTransport(anchor, cgroup.procs_files)

    def attach(self, node: Node, config: NodeConfig, state_dir: str) -> Node:
        """An SSH node asked to emulate its device: its cgroup made on its host (calibrated
        there first unless the quota is fixed); the node whose commands join it. Other nodes
        come back as they are. `detach` removes the cgroup (before the node is closed)."""
        profile = config.device
        if config.is_local or profile is None or not config.remote_device:
            return node
        require_root(node, config)
        if profile.cpu_quota is None and profile.speed_fraction is not None:
            calibration = calibrate_on(node, config, profile, profile.speed_fraction, PROBE_SECONDS)
            self.calibrations[config.role] = calibration
            profile = replace(profile, cpu_quota=calibration.quota)
        cgroup = RemoteCgroup.create(node, config, profile, state_dir)
        self.remote[config.role] = cgroup
        self.cpus[config.role] = cgroup.cpus
        return Node(CgroupTransport(node.transport, cgroup.procs_files))

    def detach(self, role: Role) -> None:
        cgroup = self.remote.pop(role, None)
        if cgroup is not None:
            cgroup.remove()

    def watch(self, role: Role, anchor_pid: int) -> WatchSpec:
        """What a modelled meter follows for this node: its cgroup, with the CPU time scaled to
        the emulated device's cores, else its accounting cgroup, else the anchor's process
        tree; and its network interface."""
        cgroup = self.cgroups.get(role)
        counting = self.accounting.cgroups.get(role)
        if cgroup is not None:
            profile = cgroup.profile
            spec = WatchSpec(
                "cgroup",
                str(cgroup.usage_directory),
                core_fraction=profile.cpu_quota or 1.0,
                cores=profile.cores,
            )
        elif counting is not None:
            spec = WatchSpec("cgroup", str(counting.usage_directory))
        else:
            spec = WatchSpec("pid", str(anchor_pid))
        return replace(spec, interface=self.interface(role), interface_pid=anchor_pid)

    def interface(self, role: Role) -> str:
        """A local node's network interface, as its anchor sees it: its end of the data link in
        its own namespace, the one its config names, else loopback (`controller.meter.net_load`)."""
        if self.link is not None:
            return DATA_INTERFACE
        return self.config.node(role).data_interface or LOOPBACK

    def start_trials(self) -> dict[Role, NodeCgroup | RemoteCgroup]:
        """Setup is over: from now on each trial reports its own OOM kills, through the sweep's
        agent pair watching the cgroups returned (those with a memory limit)."""
        self.ready = True
        return {role: c for role, c in self.limited().items() if c.profile.memory_mib}

    def accounting_facts(self, roles: tuple[Role, ...]) -> dict[str, Any]:
        """Per modelled node, what its CPU time is read from (the manifest's
        `meter.accounting`)."""
        found = self.accounting.facts()
        for role in roles:
            cgroup = self.cgroups.get(role)
            if cgroup is not None:
                found[role] = {
                    "source": "cgroup",
                    "cgroup": str(cgroup.usage_directory),
                    "cgroup_version": cgroup.layout.version,
                }
        return {role: found[role] for role in roles if role in found}

    def limited(self) -> dict[Role, NodeCgroup | RemoteCgroup]:
        """Every emulated node's cgroup, local or on its SSH host."""
        return {**self.cgroups, **self.remote}

    def facts(self, nodes: Mapping[Role, Node], python: Mapping[Role, str]) -> dict[str, Any]:
        """The manifest's `device`: per emulated node its profile, cgroup and the probe's speed
        under it against its host unthrottled; the namespaces' link."""
        cgroups = self.limited()
        if not cgroups:
            return {"emulated": False, "link": None}
        local = run_probe(PROBE_SECONDS) if self.cgroups else None
        measured = _probe_nodes({role: nodes[role] for role in cgroups}, python)
        per_node = {}
        for role, cgroup in cgroups.items():
            if isinstance(cgroup, RemoteCgroup):
                host = probe_on(cgroup.node, python[role], PROBE_SECONDS)
                where, version = cgroup.config.host, cgroup.version
            else:
                assert local is not None
                host, where, version = local, "local", cgroup.layout.version
            run = measured[role]
            calibration = self.calibrations.get(role)
            per_node[role] = {
                **asdict(cgroup.profile),
                "host": where,
                "quota_us": cgroup.profile.quota_us,
                "calibration": calibration.facts() if calibration else None,
                "cpus": list(self.cpus[role]),
                "cgroup_version": version,
                "cgroup": cgroup.name,
                "host_probe_units_per_cpu_s": host.units_per_cpu_s,
                "probe_units_per_s": run.units_per_wall_s,
                "measured_speed_fraction": run.units_per_wall_s / host.units_per_cpu_s,
            }
        return {
            "emulated": True,
            "pi3b_core_fraction": PI3B_CORE_FRACTION,
            "host_probe_units_per_cpu_s": local.units_per_cpu_s if local else None,
            "nodes": per_node,
            "link": self._link_facts(),
        }

    def _link_facts(self) -> dict[str, Any] | None:
        if self.link is None:
            return None
        delay = self.config.link
        relay = {"delay_us": delay.delay_ms * 1000, "stats": RELAY_STATS} if delay.relayed else None
        return {**self.link.facts(), "relay": relay}


def _calibrate(
    profiles: Mapping[Role, DeviceProfile], cpus: Mapping[Role, tuple[int, ...]]
) -> dict[Role, Calibration]:
    """The quota of each profile that has a speed_fraction but no cpu_quota, measured on the
    node's first core; the nodes' cores are calibrated at the same time."""
    wanted = {
        role: (profile, profile.speed_fraction)
        for role, profile in profiles.items()
        if profile.cpu_quota is None and profile.speed_fraction is not None
    }
    with ThreadPoolExecutor() as pool:
        futures = {
            role: pool.submit(calibrate, profile, fraction, PROBE_SECONDS, cpus[role][0], role)
            for role, (profile, fraction) in wanted.items()
        }
        return {role: future.result() for role, future in futures.items()}


def _probe_nodes(nodes: Mapping[Role, Node], python: Mapping[Role, str]) -> dict[Role, ProbeRun]:
    """The probe on each node at once (each in its own cgroup, on its own cores)."""

    def probe(role: Role) -> ProbeRun:
        return probe_on(nodes[role], python[role], PROBE_SECONDS)

    with ThreadPoolExecutor() as pool:
        futures = {role: pool.submit(probe, role) for role in nodes}
        return {role: future.result() for role, future in futures.items()}


def _require_root(key: str, what: str) -> None:
    if os.geteuid() != 0:
        raise ConfigError(
            f"{key}: {what} needs root; run h2iot as root, or use {LOCAL_CONFIG}, which runs "
            "without it"
        )


def _on_link(config: Config, link: LocalLink) -> Config:
    """The config with the nodes talking over the namespaces' data link."""
    server = link.address("server")
    return replace(
        config,
        client=replace(config.client, address=server, data_interface=DATA_INTERFACE),
        server=replace(config.server, address=server, data_interface=DATA_INTERFACE),
    )


def _profiled(config: Config) -> dict[Role, DeviceProfile]:
    """The local nodes' profiles (an SSH node's is applied by `Emulation.attach`)."""
    profiles = {}
    for role in ROLES:
        node = config.node(role)
        if node.device is not None and node.is_local:
            profiles[role] = node.device
    return profiles


@contextmanager
def emulated_devices(config: Config, run_dir: Path) -> Iterator[Emulation]:
    """Cgroups and namespaces for the sweep's local nodes (see the module doc), removed on exit;
    a relayed link's relay leaves what it carried in `run_dir` (RELAY_STATS)."""
    profiles = _profiled(config)
    local = config.client.is_local and config.server.is_local
    own_link = any(config.node(role).data_interface for role in ROLES)
    isolate = local and not own_link and bool(profiles)
    if config.link.relayed and not isolate:
        raise ConfigError(
            'link.delay_method: "relay" delays the link between two local nodes\' namespaces, '
            "which they get when both are local, either has a device profile and neither names "
            'a data_interface; other links take their delay from netem ("netem")'
        )
    with ExitStack() as stack:
        emulation = Emulation(config)
        counted = _accounted(config, profiles)
        if counted:
            emulation.accounting = accounting_cgroups(counted)
            for cgroup in emulation.accounting.cgroups.values():
                stack.callback(cgroup.remove)
        if profiles:
            _emulate(config, run_dir, profiles, emulation, stack, isolate=isolate)
        try:
            yield emulation
        except DeviceError as exc:
            # A setup command that died for lack of memory (building the site, say) says only
            # "Killed": name the limit.
            reason = None if emulation.ready else oom_reason(emulation.limited(), {})
            if reason is None:
                raise
            raise EmulationError(f"{reason}: {exc}") from exc


def _accounted(config: Config, profiles: Mapping[Role, DeviceProfile]) -> tuple[Role, ...]:
    """The local nodes a modelled meter follows that get no device cgroup."""
    if not config.meter.modelled:
        return ()
    return tuple(role for role in ROLES if config.node(role).is_local and role not in profiles)


def _emulate(
    config: Config,
    run_dir: Path,
    profiles: Mapping[Role, DeviceProfile],
    emulation: Emulation,
    stack: ExitStack,
    *,
    isolate: bool,
) -> None:
    _require_root(
        f"nodes.{next(iter(profiles))}.device",
        "emulating a device (cgroups for its CPU and memory, a network namespace per node)",
    )
    if isolate:
        emulation.link = create_link(wired=config.link.relayed)
        stack.callback(destroy_link, emulation.link)
        emulation.config = _on_link(config, emulation.link)
        if config.link.relayed:
            relay = start_relay(emulation.link, config.link.delay_ms * 1000, run_dir / RELAY_STATS)
            stack.callback(relay.stop)
    available = tuple(sorted(os.sched_getaffinity(0)))
    for role, profile in profiles.items():
        try:
            emulation.cpus[role] = pinned_cores(config.node(role).cpu, profile.cores, available)
        except ValueError as exc:
            raise ConfigError(f"nodes.{role}.device: {exc}") from None
    emulation.calibrations = _calibrate(profiles, emulation.cpus)
    for role, given in profiles.items():
        calibrated = emulation.calibrations.get(role)
        profile = given if calibrated is None else replace(given, cpu_quota=calibrated.quota)
        cgroup = NodeCgroup.create(f"h2iot-{os.getpid()}-{role}", profile, emulation.cpus[role])
        stack.callback(cgroup.remove)
        emulation.cgroups[role] = cgroup
