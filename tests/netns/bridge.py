"""What both testbeds (tests.netns.topology's pair, tests.netns.star's star) build from: `ip`
itself, a free /24 for their bridge, the bridge, a namespace plugged into it, and removing what
a run that died left behind."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.netns.hosts import kill_and_wait, run_checked


def ip(*args: str) -> None:
    run_checked(["ip", *args])


def free_subnet(offset: int) -> str:
    """A 10.77.N prefix no route in the root namespace uses; the search starts at a place this
    process's id and `offset` pick, so parallel runs (and both testbeds of one) rarely meet."""
    used = run_checked(["ip", "-4", "route", "show"])
    for third in [*range((os.getpid() + offset) % 200 + 20, 250), *range(20, 250)]:
        prefix = f"10.77.{third}"
        if f"{prefix}.0/24" not in used:
            return prefix
    raise RuntimeError("no free 10.77.N.0/24 subnet for the test bridge")


def add_bridge(bridge: str, subnet: str) -> None:
    """The bridge, up, with the root namespace at `subnet`.1."""
    ip("link", "add", bridge, "type", "bridge")
    ip("addr", "add", f"{subnet}.1/24", "dev", bridge)
    ip("link", "set", bridge, "up")


def plug_in(netns: str, outside: str, bridge: str, address: str) -> None:
    """The veth end `outside` (its peer already `ctl0` in `netns`) onto the bridge; ctl0 at
    `address`/24, it and lo up."""
    ip("link", "set", outside, "master", bridge, "up")
    ip("-n", netns, "addr", "add", f"{address}/24", "dev", "ctl0")
    ip("-n", netns, "link", "set", "ctl0", "up")
    ip("-n", netns, "link", "set", "lo", "up")


def netns_pids(netns: str) -> list[int]:
    listing = subprocess.run(
        ["ip", "netns", "pids", netns], capture_output=True, text=True, check=False
    )
    return [int(pid) for pid in listing.stdout.split()]


def reap_stale_namespaces(prefix: str, kinds: str, bridge_suffix: str) -> None:
    """Remove what runs that died left: each namespace named `prefix`, the owner's pid and a
    `kinds` match whose owner is gone, what runs in it, and its bridge (`prefix`, pid,
    `bridge_suffix`)."""
    listing = run_checked(["ip", "netns", "list"]).split("\n")
    for netns in (line.split()[0] for line in listing if line.strip()):
        owner = re.fullmatch(rf"{prefix}(\d+)(?:{kinds})", netns)
        if owner is None or Path(f"/proc/{owner[1]}").exists():
            continue
        for pid in netns_pids(netns):
            kill_and_wait(pid)
        subprocess.run(["ip", "netns", "del", netns], check=False)
        bridge = f"{prefix}{owner[1]}{bridge_suffix}"
        subprocess.run(["ip", "link", "del", bridge], check=False, capture_output=True)
