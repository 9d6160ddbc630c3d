"""Several client namespaces and one server namespace, each running sshd, on one bridge.

    root ns: bridge multi<pid>b 10.77.N.1/24
        --veth-- multi<pid>s  ctl0 10.77.N.2 (sshd :22, the server)
        --veth-- multi<pid>c1 ctl0 10.77.N.3 (sshd :22)
        --veth-- multi<pid>c2 ctl0 10.77.N.4 ...

The bridge carries both the controller's SSH and the clients' HTTP/2 to the server (what K
clients on one switch port each would be). Names carry this process's id; a run that died leaves
namespaces `multi<pid>*` that the next run removes (`reap_stale`). No default route.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.netns.bridge import (
    add_bridge,
    free_subnet,
    ip,
    netns_pids,
    plug_in,
    reap_stale_namespaces,
)
from tests.netns.hosts import SshHost, SshKey, kill_and_wait, run_checked, start_sshd

PREFIX = "multi"


@dataclass
class Star:
    """The namespaces and their sshd hosts; `destroy()` undoes what was made."""

    directory: Path
    clients: int
    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}")
    hosts: dict[str, SshHost] = field(default_factory=dict)  # "server", "client1", ...
    namespaces: dict[str, str] = field(default_factory=dict)
    bridge: str | None = None

    @property
    def server(self) -> SshHost:
        return self.hosts["server"]

    @property
    def client_hosts(self) -> list[SshHost]:
        return [self.hosts[f"client{index}"] for index in range(1, self.clients + 1)]

    def pids(self, name: str) -> list[int]:
        """Every process in a node's namespace (its sshd, its sessions, what they started)."""
        listing = run_checked(["ip", "netns", "pids", self.namespaces[name]])
        return [int(pid) for pid in listing.split()]

    def kill(self, name: str) -> None:
        """Take a node down: everything in its namespace, sshd first."""
        sshd = int(self.hosts[name].pidfile.read_text().split()[0])
        kill_and_wait(sshd)
        for pid in self.pids(name):
            kill_and_wait(pid)

    def revive(self, name: str, key: SshKey) -> SshHost:
        """Bring a node taken down back: a new sshd (with a new host key and home) at its
        address."""
        down = self.hosts[name]
        netns = self.namespaces[name]
        directory = self.directory / f"{name}-{len(list(self.directory.glob(f'{name}*')))}"
        host = start_sshd(directory, name, down.address, down.port, key, netns=netns)
        self.hosts[name] = host
        return host

    def create(self, key: SshKey) -> None:
        reap_stale()
        # Its own start for the subnet search: a topology.Testbed of the same run may hold one.
        subnet = free_subnet(offset=101)
        self.bridge = f"{self.tag}b"
        add_bridge(self.bridge, subnet)
        names = ["server", *(f"client{index}" for index in range(1, self.clients + 1))]
        for index, name in enumerate(names, start=2):
            short = "s" if name == "server" else f"c{name.removeprefix('client')}"
            netns = f"{self.tag}{short}"
            ip("netns", "add", netns)
            self.namespaces[name] = netns
            outside = f"mu{os.getpid()}{short}"
            ip("link", "add", outside, "type", "veth", "peer", "name", "ctl0", "netns", netns)
            plug_in(netns, outside, self.bridge, f"{subnet}.{index}")
            self.hosts[name] = start_sshd(
                self.directory / name, name, f"{subnet}.{index}", 22, key, netns=netns
            )

    def destroy(self) -> None:
        for name, netns in self.namespaces.items():
            for pid in netns_pids(netns):
                kill_and_wait(pid)
            if name in self.hosts:
                self.hosts[name].stop()
            subprocess.run(["ip", "netns", "del", netns], check=False)
        if self.bridge:
            subprocess.run(["ip", "link", "del", self.bridge], check=False, capture_output=True)


def reap_stale() -> None:
    """Remove the stars of runs that died (their owner pid is gone)."""
    reap_stale_namespaces(PREFIX, r"s|c\d+", "b")
