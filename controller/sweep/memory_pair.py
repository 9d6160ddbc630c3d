"""Trials that fail because a node ran out of its device's memory say so.

When a node exceeds its cgroup's memory limit the kernel kills one of its processes: the client
agent's fetch then fails, or the server agent dies under it (or while starting). The agents
cannot tell why; the cgroup's OOM-kill counter can (`controller.device.oom`).
`MemoryWatchedPair` reads it around each trial and puts the reason first in the failed trial's
error. A server that cannot even start within the limit fails the trial instead of pausing the
sweep as a lost node would: the next trial tries again, and the sweep goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.config.model import Role, TrialPoint
from controller.device.emulation import Emulation
from controller.device.oom import LimitedNode, oom_kills, oom_reason
from controller.sweep.agent_pair import AgentPair
from controller.sweep.errors import NodeLost


def make_pair(devices: Emulation, *args: Any, **kwargs: Any) -> AgentPair:
    """The sweep's AgentPair (`args`, `kwargs`: AgentPair's); over emulated devices with memory
    limits, one whose failed trials name an OOM kill."""
    limited = devices.start_trials()
    if not limited:
        return AgentPair(*args, **kwargs)
    return MemoryWatchedPair(limited, *args, **kwargs)


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

    def ensure_server(self, point: TrialPoint) -> None:
        before = self._kills()
        try:
            super().ensure_server(point)
        except NodeLost as exc:
            reason = self._reason(before)
            if reason is None:
                raise
            self._pending = f"{reason} (server agent: {exc})"

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        pending = self._pending
        if pending is not None:
            self._pending = None
            return {"ok": False, "error": pending}
        before = self._kills()
        result = super().run_trial(trial_id, point, timeout_s)
        if not result.get("ok"):
            reason = self._reason(before)
            if reason is not None:
                result = {**result, "error": f"{reason}: {result.get('error') or 'failed'}"}
        return result
