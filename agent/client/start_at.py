"""Trials that begin at an agreed instant (`--start-at`): several client nodes started
together agree on it through their clock offsets."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.client.connect import Target
    from agent.client.options import RunPlan
    from agent.client.run import Prepare, Prepared


def wait_until(start_at: float | None) -> None:
    """Sleep until this node's wall clock reads `start_at` (no busy wait: a spinning client
    would be measured); return at once when it has passed or is None."""
    if start_at is None:
        return
    while (left := start_at - time.time()) > 0:
        time.sleep(left)


def then_wait(prepare: Prepare, start_at: float) -> Prepare:
    """`prepare` (the workload's set-up, untimed, e.g. hashing a blob), then the wait: so the
    first trial, not the set-up, begins at the agreed instant."""

    async def prepared_then_waited(plan: RunPlan, target: Target) -> Prepared:
        prepared = await prepare(plan, target)
        wait_until(start_at)
        return prepared

    return prepared_then_waited
