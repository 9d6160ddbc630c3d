"""Two network namespaces with sshd each, reached from the root namespace over a bridge.

    root ns: bridge BR 10.77.N.1/24 --veth-- client ns ctl0 10.77.N.2 (sshd :22)
                                     --veth-- server ns ctl0 10.77.N.3 (sshd :22)
    client ns data0 10.78.0.1/24 <------ veth data link ------> server ns data0 10.78.0.2/24

Names carry this process's id and N is a /24 no route in the root namespace uses yet, so test
runs in parallel do not collide. There is no default route in the namespaces.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.netns.bridge import (
    add_bridge,
    free_subnet,
    ip,
    plug_in,
    reap_stale_namespaces,
)
from tests.netns.hosts import SshHost, SshKey, kill_and_wait, run_checked, start_sshd

# start_sshd's signature: (directory, name, address, port, key, netns=, data_address=) -> host.
HostStarter = Callable[..., SshHost]

DATA_PREFIX = "10.78.0"


@dataclass
class Testbed:
    """The namespaces, links and sshd hosts; `destroy()` undoes what was made, in order."""

    __test__ = False  # not a pytest test class despite its name

    directory: Path
    tag: str = field(default_factory=lambda: f"h2t{os.getpid()}")
    hosts: dict[str, SshHost] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    bridge: str | None = None
    # What runs each node's sshd (tests.emulated starts one inside an emulated Pi's root).
    start_host: HostStarter = start_sshd

    @property
    def client(self) -> SshHost:
        return self.hosts["client"]

    @property
    def server(self) -> SshHost:
        return self.hosts["server"]

    @property
    def data_interface(self) -> str:
        """The data link's interface name inside either namespace (the one to shape with tc)."""
        return "data0"

    def exec_in(self, role: str, argv: list[str]) -> str:
        """Run argv inside a node's namespace (as root), returning its stdout."""
        return run_checked(["ip", "netns", "exec", f"{self.tag}{role[0]}", *argv])

    def create(self, key: SshKey) -> None:
        reap_stale()
        subnet = free_subnet(offset=0)
        self.bridge = f"{self.tag}br"
        add_bridge(self.bridge, subnet)
        for index, role in enumerate(("client", "server"), start=2):
            netns = f"{self.tag}{role[0]}"
            ip("netns", "add", netns)
            self.namespaces.append(netns)
            outside = f"{self.tag}{role[0]}0"
            ip("link", "add", outside, "type", "veth", "peer", "name", f"{outside}x")
            ip("link", "set", f"{outside}x", "netns", netns, "name", "ctl0")
            plug_in(netns, outside, self.bridge, f"{subnet}.{index}")
        client_ns, server_ns = self.namespaces
        ip("link", "add", f"{self.tag}cd", "type", "veth", "peer", "name", f"{self.tag}sd")
        for netns, end, host in ((client_ns, "cd", 1), (server_ns, "sd", 2)):
            ip("link", "set", f"{self.tag}{end}", "netns", netns, "name", "data0")
            ip("-n", netns, "addr", "add", f"{DATA_PREFIX}.{host}/24", "dev", "data0")
            ip("-n", netns, "link", "set", "data0", "up")
        for index, role in enumerate(("client", "server"), start=2):
            self.hosts[role] = self.start_host(
                self.directory / role,
                role,
                f"{subnet}.{index}",
                22,
                key,
                netns=f"{self.tag}{role[0]}",
                data_address=f"{DATA_PREFIX}.{index - 1}",
            )

    def destroy(self) -> None:
        for netns in self.namespaces:
            # Everything still running in the namespace was started by these tests (sshd, its
            # sessions and what they left in the background).
            pids = subprocess.run(
                ["ip", "netns", "pids", netns], capture_output=True, text=True, check=False
            ).stdout.split()
            for pid in pids:
                kill_and_wait(int(pid))
        for host in self.hosts.values():
            host.stop()
        for netns in self.namespaces:
            subprocess.run(["ip", "netns", "del", netns], check=False)
        if self.bridge:
            subprocess.run(["ip", "link", "del", self.bridge], check=False, capture_output=True)


def reap_stale() -> None:
    """Remove the testbeds of runs that died (their owner pid is gone)."""
    reap_stale_namespaces("h2t", "[cs]", "br")
