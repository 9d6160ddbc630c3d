"""`h2iot-agent fetch`: repeated page fetches and their output lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.client.fetch import FetchOptions, PageFetch, Target, download_manifest, record_line
from agent.client.record import FetchRecord
from agent.errors import SiteError
from agent.flow import FlowControlOptions
from agent.marker import open_marker
from agent.site.manifest import SiteManifest, parse_manifest


@dataclass(frozen=True)
class FetchPlan:
    url: str
    settings: dict[str, int]
    flow: FlowControlOptions
    repeat: int
    trial_id: str
    manifest_path: Path | None
    timeout_s: float
    json_lines: bool
    marker: str
    cpu_pin: int | None
    insecure: bool = False
    ca_file: str | None = None


def _read_manifest(path: Path) -> SiteManifest:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SiteError(f"--manifest {path}: {exc.strerror}") from None
    return parse_manifest(text, source=str(path))


def _summary(record: FetchRecord) -> str:
    if not record.ok:
        return f"{record.trial_id}: FAILED: {record.error}"
    return (
        f"{record.trial_id}: {len(record.resources)} resources, {record.body_bytes} bytes in "
        f"{record.response_s * 1000:.1f} ms, CPU {record.cpu_s * 1000:.1f} ms "
        f"({record.cpu_pct:.0f} %), peak RSS {record.rss_peak_bytes / 2**20:.1f} MiB"
    )


async def run_fetches(plan: FetchPlan) -> int:
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
        manifest = _read_manifest(plan.manifest_path)
    else:
        manifest = await download_manifest(target, options)
    marker = open_marker(plan.marker)
    failures = 0
    try:
        for repetition in range(1, plan.repeat + 1):
            trial_id = plan.trial_id if plan.repeat == 1 else f"{plan.trial_id}-{repetition}"
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
            print(record_line(record) if plan.json_lines else _summary(record), flush=True)
    finally:
        marker.close()
    return 1 if failures else 0
