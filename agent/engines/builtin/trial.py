"""`h2iot-agent trial` on the builtin engine: the agent's own client, each trial on an event
loop of the run's choosing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.client.start_at import then_wait
from agent.event_loop import DEFAULT_EVENT_LOOP, run_on

if TYPE_CHECKING:
    from agent.client.options import RunPlan
    from agent.client.run import Prepare, TrialBracket
    from agent.protocols import ProtocolSpec
    from agent.trial_request import TrialRequest


def run(request: TrialRequest, plan: RunPlan, protocol: ProtocolSpec) -> int:
    if protocol.quic:
        protocol.require_stack()
        # qh3 and the agent's HTTP/3 loaded and initialised now, not in the first trial's
        # measured window.
        from agent.client.h3 import warm_up  # noqa: PLC0415

        warm_up()
        plan.options.quic_windows()  # a setting without a counterpart fails here, before any trial
    from agent.client.run import run_trials  # noqa: PLC0415
    from agent.workloads.load import client_prepare  # noqa: PLC0415

    bracket: TrialBracket | None = None
    if plan.trial_control is not None:
        from agent.trial_control import TrialControl  # noqa: PLC0415

        bracket = TrialControl(plan.trial_control)
    prepare: Prepare = client_prepare(plan.workload)
    if request.start_at_s is not None:
        prepare = then_wait(prepare, request.start_at_s)
    loop = request.event_loop or DEFAULT_EVENT_LOOP
    return run_on(loop, lambda: run_trials(plan, prepare, bracket))
