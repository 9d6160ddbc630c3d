"""The span a trial's energy integrates over (`[energy] window`), from the client's record. Pure.

"fetch" (the default): the fetch itself, from the client agent's probe start to its connection
closed (its last byte for an engine that records no phases), cut by the trial's marker edges
where they arrived (else the client's wall clock, mapped).

"process": the client's whole trial process, start-up and teardown included, as the study
integrated power "over each process's duration" (one `nghttp` per fetch). The fetch window is
widened at both ends by how long the process ran before the fetch started and after it ended,
both on the node's own monotonic clock: the process's start and reaping come from the node's
anchor (`controller.nodes.agent.TRIAL_PROCESS`), the fetch's from the agent's `t_mono_*`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.nodes.agent import TRIAL_PROCESS

_NS = 1e9


class WindowError(ValueError):
    """The client's record lacks what the energy window needs (names the field): the trial
    fails with this reason, as one whose meter trace does not cover it (not a lost node)."""


@dataclass(frozen=True)
class TrialSpan:
    """The fetch on the controller's wall clock, and how far the energy window reaches beyond
    it at each end (0 for the fetch window)."""

    start_wall_ns: int
    end_wall_ns: int
    before_s: float = 0.0
    after_s: float = 0.0


def trial_span(client: Mapping[str, Any], offset_ns: int, window: str) -> TrialSpan:
    """The span of `window` for one trial; `offset_ns` is the client's clock minus the
    controller's."""
    # The close phase is the window's (the marker's falling edge follows it): the window runs
    # past the last byte (t_*_end_ns) to the connection closed, where the record says when.
    closing_ns = _closing_ns(client)
    fetch = TrialSpan(
        int(client["t_wall_start_ns"]) - offset_ns,
        int(client["t_wall_end_ns"]) - offset_ns + closing_ns,
    )
    if window == "fetch":
        return fetch
    process = client.get(TRIAL_PROCESS)
    if not isinstance(process, Mapping):
        raise WindowError(
            'energy.window = "process": the client node did not time its trial process '
            f"(no {TRIAL_PROCESS} in its record; only a local node's anchor does)"
        )
    try:
        before_ns = int(client["t_mono_start_ns"]) - int(process["t_mono_start_ns"])
        after_ns = int(process["t_mono_end_ns"]) - int(client["t_mono_end_ns"]) - closing_ns
    except KeyError as exc:
        raise WindowError(f'energy.window = "process": the record has no {exc.args[0]}') from None
    if before_ns < 0 or after_ns < 0:
        raise WindowError(
            'energy.window = "process": the fetch lies outside its process '
            f"({before_ns / _NS:.6f} s before, {after_ns / _NS:.6f} s after): not one clock?"
        )
    return TrialSpan(fetch.start_wall_ns, fetch.end_wall_ns, before_ns / _NS, after_ns / _NS)


def _closing_ns(client: Mapping[str, Any]) -> int:
    """From the last byte to the connection closed, on the client's clock; 0 for a record
    without phases (the nghttp2 engine's tools, whose close cannot be seen from outside)."""
    phases = client.get("phases")
    if not isinstance(phases, Mapping):
        return 0
    return int(phases["close_done_mono_ns"]) - int(client["t_mono_end_ns"])
