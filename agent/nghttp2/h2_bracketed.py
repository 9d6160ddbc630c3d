"""The h2 engine's page fetches against an nghttpd server: each bracketed by trial-control
messages (agent.nghttp2.control), since nghttpd's agent cannot see the trial header. The fetches
themselves are the h2 engine's own (`agent.client.fetch.PageFetch`), unchanged."""

from __future__ import annotations

from agent.client.fetch import FetchOptions, PageFetch, Target, download_manifest
from agent.client.run import FetchPlan
from agent.marker import open_marker
from agent.nghttp2.client import print_record, read_manifest, trial_ids
from agent.nghttp2.control import TrialControl


async def run_bracketed_fetches(plan: FetchPlan, control_address: str) -> int:
    target = Target.parse(plan.url)
    options = FetchOptions(
        settings=plan.settings,
        flow=plan.flow,
        timeout_s=plan.timeout_s,
        insecure=plan.insecure,
        ca_file=plan.ca_file,
        cpu_pin=plan.cpu_pin,
    )
    if plan.manifest_path is not None:
        manifest = read_manifest(plan.manifest_path)
    else:
        manifest = await download_manifest(target, options)
    control = TrialControl(control_address)
    marker = open_marker(plan.marker)
    failures = 0
    try:
        for repetition, trial_id in enumerate(trial_ids(plan.trial_id, plan.repeat), 1):
            control.begin(trial_id)
            fetch = PageFetch(
                target,
                manifest=manifest,
                options=options,
                trial_id=trial_id,
                repetition=repetition,
                marker=marker,
            )
            record = await fetch.run()
            failures += not record.ok
            # Printed first: a failed `end` must not lose the client's own record.
            print_record(record.to_dict(), plan.json_lines)
            control.end(
                trial_id,
                ok=record.ok,
                requests=len(record.resources),
                responses_completed=len(record.resources),
            )
    finally:
        marker.close()
        control.close()
    return 1 if failures else 0
