"""Trials that fail because a node ran out of its device's memory say so.

When a node exceeds its cgroup's memory limit the kernel kills one of its processes: the client
agent's fetch then fails, or the server agent dies under it (or while starting). The agents
cannot tell why; the cgroup's OOM-kill counter can. `MemoryWatchedPair` reads it around each
trial and puts the reason first in the failed trial's error. A server that cannot even start
within the limit fails the trial instead of pausing the sweep as a lost node would: the next
trial tries again, and the sweep goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from controller.config.model import Role
from controller.config.profile import DeviceProfile
from controller.sweep.agent_pair import AgentPair
from controller.sweep.interfaces import NodeLost


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


class MemoryWatchedPair(AgentPair):
    """An AgentPair over nodes with memory limits (`cgroups`: the limited nodes' cgroups)."""

    def __init__(self, cgroups: Mapping[Role, LimitedNode], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cgroups = dict(cgroups)
        self._pending: str | None = None

    def _kills(self) -> dict[Role, int]:
        return oom_kills(self._cgroups)

    def _reason(self, before: Mapping[Role, int]) -> str | None:
        return oom_reason(self._cgroups, before)

    def ensure_server(self, settings: Mapping[str, int]) -> None:
        before = self._kills()
        try:
            super().ensure_server(settings)
        except NodeLost as exc:
            reason = self._reason(before)
            if reason is None:
                raise
            self._pending = f"{reason} (server agent: {exc})"

    def fetch(self, trial_id: str, settings: Mapping[str, int], timeout_s: float) -> dict[str, Any]:
        pending = self._pending
        if pending is not None:
            self._pending = None
            return {"ok": False, "error": pending}
        before = self._kills()
        result = super().fetch(trial_id, settings, timeout_s)
        if not result.get("ok"):
            reason = self._reason(before)
            if reason is not None:
                result = {**result, "error": f"{reason}: {result.get('error') or 'failed'}"}
        return result
