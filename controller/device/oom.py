"""Out-of-memory kills in the nodes' cgroups, named for the user.

When a node exceeds its cgroup's memory limit the kernel kills one of its processes, and what
died cannot tell why; the cgroup's OOM-kill counter can. `oom_reason` compares the counters
with an earlier reading and says which node's limit was hit. The sweep's agent pair reads them
around each trial (`controller.sweep.memory_pair`); `emulation` around the sweep's setup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from controller.config.model import Role
from controller.config.profile import DeviceProfile


class LimitedNode(Protocol):
    """A node's cgroup, on this machine or on an SSH node's host."""

    @property
    def profile(self) -> DeviceProfile: ...

    def oom_kills(self) -> int: ...


def oom_kills(cgroups: Mapping[Role, LimitedNode]) -> dict[Role, int]:
    return {role: cgroup.oom_kills() for role, cgroup in cgroups.items()}


def oom_reason(cgroups: Mapping[Role, LimitedNode], before: Mapping[Role, int]) -> str | None:
    """What the kernel killed for lack of memory since `before` (OOM kills per node), or None."""
    reasons = []
    for role, kills in oom_kills(cgroups).items():
        new = kills - before.get(role, 0)
        if new > 0:
            profile = cgroups[role].profile
            reasons.append(
                f"out of memory: the kernel killed {new} process{'es' if new > 1 else ''} "
                f"of the {role} node, which exceeded its device's memory limit "
                f"({profile.memory_mib} MiB, profile {profile.profile})"
            )
    return "; ".join(reasons) or None
