"""The h2 engine's page fetches against an nghttpd server: each bracketed by trial-control
messages (agent.nghttp2.control), since nghttpd's agent cannot see the trial header. The fetches
themselves are the h2 engine's own, unchanged."""

from __future__ import annotations

from agent.client.options import RunPlan
from agent.client.run import run_fetches
from agent.nghttp2.control import TrialControl


async def run_bracketed_fetches(plan: RunPlan) -> int:
    assert plan.trial_control is not None
    return await run_fetches(plan, bracket=TrialControl(plan.trial_control))
