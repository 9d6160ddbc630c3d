"""`h2iot-agent trial` and `fetch`: the run of trials, one output line per trial."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agent.client.connect import Target
from agent.client.options import RunPlan
from agent.client.trial import Driver, run_trial, unrun_record
from agent.errors import AgentError, UsageError
from agent.marker import open_marker
from agent.workloads import spec_of


@dataclass(frozen=True)
class Prepared:
    """A workload ready to run trials: what it needed fetched or computed beforehand (outside
    any timed trial) is inside `new_driver`."""

    params: Mapping[str, object]  # the params its trials run with, canonical
    new_driver: Callable[[], Driver]


# A workload's client side: agent.workloads.<kind>.client.prepare
Prepare = Callable[[RunPlan, Target], Awaitable[Prepared]]


def summary(record: dict[str, Any]) -> str:
    """The human line for one trial record, of either engine."""
    if not record["ok"]:
        return f"{record['trial_id']}: FAILED: {record['error']}"
    metrics = ", ".join(f"{name} {value}" for name, value in record["metrics"].items())
    return (
        f"{record['trial_id']}: {record['workload']} ({metrics}) in "
        f"{record['response_s'] * 1000:.1f} ms, CPU {record['cpu_s'] * 1000:.1f} ms "
        f"({record['cpu_pct']:.0f} %), peak RSS {record['rss_peak_bytes'] / 2**20:.1f} MiB"
    )


def print_record(record: dict[str, Any], json_lines: bool) -> None:
    print(json.dumps(record, separators=(",", ":")) if json_lines else summary(record), flush=True)


class TrialBracket(Protocol):
    """Tells the server where each trial begins and ends, for servers that cannot see the
    trial header (nghttpd: agent.trial_control.TrialControl)."""

    def begin(self, trial_id: str) -> None: ...
    def end(self, trial_id: str, *, ok: bool, requests: int, responses_completed: int) -> None: ...
    def close(self) -> None: ...


def print_unrun(plan: RunPlan, error: str) -> int:
    """A failed record for every trial of the plan, none of which could start; status 1."""
    metric_names = [field.name for field in spec_of(plan.workload).fields]
    for repetition, trial_id in enumerate(plan.trial_ids(), 1):
        record = unrun_record(
            plan,
            trial_id=trial_id,
            repetition=repetition,
            error=error,
            metric_names=metric_names,
            marker=plan.marker,
        )
        print_record(record.to_dict(), plan.json_lines)
    return 1


async def run_trials(plan: RunPlan, prepare: Prepare, bracket: TrialBracket | None = None) -> int:
    """Every trial of the plan, one output line each; exit status 1 if any failed."""
    target = Target.parse(plan.url)
    try:
        prepared = await prepare(plan, target)
    except UsageError:
        raise  # the user's mistake (a --manifest file): one line, status 2, no trial
    except AgentError as exc:
        return print_unrun(plan, str(exc))
    marker = open_marker(plan.marker)
    failures = 0
    try:
        for repetition, trial_id in enumerate(plan.trial_ids(), 1):
            if bracket is not None:
                bracket.begin(trial_id)
            driver = prepared.new_driver()
            record = await run_trial(
                target,
                plan.options,
                driver,
                workload=plan.workload,
                engine=plan.engine,
                params=prepared.params,
                trial_id=trial_id,
                repetition=repetition,
                marker=marker,
            )
            failures += not record.ok
            # Printed first: a failed `end` must not lose the client's own record.
            print_record(record.to_dict(), plan.json_lines)
            if bracket is not None:
                done = len(driver.responses)
                bracket.end(trial_id, ok=record.ok, requests=done, responses_completed=done)
    finally:
        marker.close()
        if bracket is not None:
            bracket.close()
    return 1 if failures else 0
