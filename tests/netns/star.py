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
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

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
        subnet = _free_subnet()
        self.bridge = f"{self.tag}b"
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        names = ["server", *(f"client{index}" for index in range(1, self.clients + 1))]
        for index, name in enumerate(names, start=2):
            short = "s" if name == "server" else f"c{name.removeprefix('client')}"
            netns = f"{self.tag}{short}"
            _ip("netns", "add", netns)
            self.namespaces[name] = netns
            outside = f"mu{os.getpid()}{short}"
            _ip("link", "add", outside, "type", "veth", "peer", "name", "ctl0", "netns", netns)
            _ip("link", "set", outside, "master", self.bridge, "up")
            _ip("-n", netns, "addr", "add", f"{subnet}.{index}/24", "dev", "ctl0")
            _ip("-n", netns, "link", "set", "ctl0", "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            self.hosts[name] = start_sshd(
                self.directory / name, name, f"{subnet}.{index}", 22, key, netns=netns
            )

    def destroy(self) -> None:
        for name, netns in self.namespaces.items():
            for pid in _pids(netns):
                kill_and_wait(pid)
            if name in self.hosts:
                self.hosts[name].stop()
            subprocess.run(["ip", "netns", "del", netns], check=False)
        if self.bridge:
            subprocess.run(["ip", "link", "del", self.bridge], check=False, capture_output=True)


def _pids(netns: str) -> list[int]:
    listing = subprocess.run(
        ["ip", "netns", "pids", netns], capture_output=True, text=True, check=False
    )
    return [int(pid) for pid in listing.stdout.split()]


def reap_stale() -> None:
    """Remove what runs that died (their owner pid is gone) left: processes in their
    namespaces, the namespaces and their bridges."""
    listing = run_checked(["ip", "netns", "list"]).split("\n")
    for netns in (line.split()[0] for line in listing if line.strip()):
        owner = re.fullmatch(rf"{PREFIX}(\d+)(s|c\d+)", netns)
        if owner is None or Path(f"/proc/{owner[1]}").exists():
            continue
        for pid in _pids(netns):
            kill_and_wait(pid)
        subprocess.run(["ip", "netns", "del", netns], check=False)
        subprocess.run(
            ["ip", "link", "del", f"{PREFIX}{owner[1]}b"], check=False, capture_output=True
        )


def _ip(*args: str) -> None:
    run_checked(["ip", *args])


def _free_subnet() -> str:
    used = run_checked(["ip", "-4", "route", "show"])
    for third in [*range((os.getpid() + 101) % 200 + 20, 250), *range(20, 250)]:
        prefix = f"10.77.{third}"
        if f"{prefix}.0/24" not in used:
            return prefix
    raise RuntimeError("no free 10.77.N.0/24 subnet for the test bridge")
