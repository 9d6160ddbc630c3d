"""Two local nodes in network namespaces of their own, joined by a veth data link.

    client namespace  data0 10.79.0.1/24 <--- veth ---> data0 10.79.0.2/24  server namespace

or, when the link's delay is a userspace relay (`wired`), through a third namespace where the
relay (`controller.device.wire`) carries frames between two veth ends:

    client data0 <--- veth ---> client0 [wire namespace: relay] server0 <--- veth ---> data0 server

The same construction as the SSH test hosts (`tests/netns`), without the control bridge: local
nodes are driven through their anchor's pipes, so only the data link exists, and nothing in the
namespaces routes anywhere else. `[link]` then shapes `data0` at both ends.

A process joins a namespace by being started from a thread that entered it (`setns` changes
only the calling thread, and a child inherits its parent thread's namespaces): the node's anchor
is started that way, and everything it runs stays inside.

Namespaces are named `h2d<controller pid>c`, `...s` (and `...w`); those of a controller that
died are removed (with what still runs in them) the next time a link is made.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from controller.config.model import ROLES, Role
from controller.device.errors import EmulationError
from controller.nodes.namespace import NetnsError, in_netns

DATA_INTERFACE = "data0"
SUBNET = "10.79.0"
NETNS_DIR = Path("/run/netns")
_STEP_TIMEOUT_S = 30.0
_STALE = re.compile(r"h2d(\d+)[csw]")
Place = Literal["client", "server", "wire"]
WIRE: Literal["wire"] = "wire"
WIRE_ENDS: dict[Role, str] = {"client": "client0", "server": "server0"}
# The relay moves whole frames: each end must hand it frames of at most the MTU with their
# checksums filled in (a veth otherwise passes half-made checksums and oversized segments on).
_OFFLOADS_OFF = ("tx", "off", "tso", "off", "gso", "off", "gro", "off")

T = TypeVar("T")


@dataclass(frozen=True)
class LocalLink:
    """The namespaces and addresses of one sweep's local data link."""

    tag: str
    wired: bool = False  # through the wire namespace's relay, not one veth pair

    @property
    def places(self) -> tuple[Place, ...]:
        """Whose namespaces the link has."""
        return (*ROLES, WIRE) if self.wired else ROLES

    def namespace(self, place: Place) -> str:
        return f"{self.tag}{place[0]}"

    def address(self, role: Role) -> str:
        return f"{SUBNET}.{ROLES.index(role) + 1}"

    def facts(self) -> dict[str, object]:
        return {
            "interface": DATA_INTERFACE,
            "namespaces": {place: self.namespace(place) for place in self.places},
            "addresses": {role: self.address(role) for role in ROLES},
        }


def _ip(*args: str) -> str:
    try:
        result = subprocess.run(
            ["ip", *args], capture_output=True, text=True, timeout=_STEP_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise EmulationError("netns: the ip command (iproute2) is not installed") from None
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()
        raise EmulationError(
            f"netns: `ip {' '.join(args)}` failed: {detail[-1] if detail else result.returncode}"
        )
    return result.stdout


def _kill_inside(netns: str) -> None:
    with contextlib.suppress(EmulationError):
        for pid in _ip("netns", "pids", netns).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _delete(netns: str) -> None:
    _kill_inside(netns)
    with contextlib.suppress(EmulationError):
        _ip("netns", "del", netns)


def reap_stale() -> None:
    """Remove the namespaces of controllers that are gone."""
    if not NETNS_DIR.is_dir():
        return
    for entry in NETNS_DIR.iterdir():
        match = _STALE.fullmatch(entry.name)
        if match and not Path(f"/proc/{match[1]}").exists():
            _delete(entry.name)


def create_link(tag: str | None = None, *, wired: bool = False) -> LocalLink:
    """The namespaces, the veth pair between the nodes' (or a pair from each to the wire
    namespace, offloads off), addresses, links up."""
    reap_stale()
    if wired and shutil.which("ethtool") is None:
        raise EmulationError(
            "netns: the relay's link needs ethtool (Debian package ethtool) to turn off the "
            "offloads a relay cannot carry"
        )
    link = LocalLink(tag or f"h2d{os.getpid()}", wired)
    made: list[str] = []
    try:
        for place in link.places:
            _ip("netns", "add", link.namespace(place))
            made.append(link.namespace(place))
        if wired:
            for role in ROLES:
                node_end, wire_end = f"{link.tag}{role[0]}0", f"{link.tag}{role[0]}w"
                _ip("link", "add", node_end, "type", "veth", "peer", "name", wire_end)
                _ip("link", "set", wire_end, "netns", link.namespace(WIRE), "name", WIRE_ENDS[role])
                _ip("-n", link.namespace(WIRE), "link", "set", WIRE_ENDS[role], "up")
                _offloads_off(link.namespace(WIRE), WIRE_ENDS[role])
        else:
            _ip("link", "add", f"{link.tag}c0", "type", "veth", "peer", "name", f"{link.tag}s0")
        for role in ROLES:
            netns = link.namespace(role)
            _ip("link", "set", f"{link.tag}{role[0]}0", "netns", netns, "name", DATA_INTERFACE)
            _ip("-n", netns, "addr", "add", f"{link.address(role)}/24", "dev", DATA_INTERFACE)
            _ip("-n", netns, "link", "set", DATA_INTERFACE, "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            if wired:
                _offloads_off(netns, DATA_INTERFACE)
    except BaseException:
        for netns in made:
            _delete(netns)
        raise
    return link


def _offloads_off(netns: str, interface: str) -> None:
    _ip("netns", "exec", netns, "ethtool", "-K", interface, *_OFFLOADS_OFF)


def destroy_link(link: LocalLink) -> None:
    """Kill what still runs inside, delete the namespaces (the veth pairs go with them)."""
    for place in link.places:
        _delete(link.namespace(place))


def run_inside(netns: str, make: Callable[[], T]) -> T:
    """Call `make` on a thread that has entered `netns`: processes it starts live there."""
    try:
        return in_netns(NETNS_DIR / netns, make)
    except NetnsError as exc:
        raise EmulationError(f"netns: {netns}: {exc.strerror}") from None
