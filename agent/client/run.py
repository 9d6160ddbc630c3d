"""`h2iot-agent fetch`: repeated page fetches and their output lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from agent.client.fetch import PageFetch, Target, download_manifest
from agent.client.options import RunPlan
from agent.errors import SiteError
from agent.marker import open_marker
from agent.site.manifest import SiteManifest, parse_manifest


def read_manifest(path: Path) -> SiteManifest:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SiteError(f"--manifest {path}: {exc.strerror}") from None
    return parse_manifest(text, source=str(path))


def summary(record: dict[str, Any]) -> str:
    """The human line for one fetch record, of either engine."""
    if not record["ok"]:
        return f"{record['trial_id']}: FAILED: {record['error']}"
    return (
        f"{record['trial_id']}: {len(record['resources'])} resources, {record['body_bytes']} "
        f"bytes in {record['response_s'] * 1000:.1f} ms, CPU {record['cpu_s'] * 1000:.1f} ms "
        f"({record['cpu_pct']:.0f} %), peak RSS {record['rss_peak_bytes'] / 2**20:.1f} MiB"
    )


def print_record(record: dict[str, Any], json_lines: bool) -> None:
    print(json.dumps(record, separators=(",", ":")) if json_lines else summary(record), flush=True)


class TrialBracket(Protocol):
    """Tells the server where each trial begins and ends, for servers that cannot see the
    trial header (nghttpd: agent.nghttp2.control.TrialControl)."""

    def begin(self, trial_id: str) -> None: ...
    def end(self, trial_id: str, *, ok: bool, requests: int, responses_completed: int) -> None: ...
    def close(self) -> None: ...


async def run_fetches(plan: RunPlan, bracket: TrialBracket | None = None) -> int:
    target = Target.parse(plan.url)
    options = plan.options
    if plan.manifest_path is not None:
        manifest = read_manifest(plan.manifest_path)
    else:
        manifest = await download_manifest(target, options)
    marker = open_marker(plan.marker)
    failures = 0
    try:
        for repetition, trial_id in enumerate(plan.trial_ids(), 1):
            if bracket is not None:
                bracket.begin(trial_id)
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
            if bracket is not None:
                done = len(record.resources)
                bracket.end(trial_id, ok=record.ok, requests=done, responses_completed=done)
    finally:
        marker.close()
        if bracket is not None:
            bracket.close()
    return 1 if failures else 0
