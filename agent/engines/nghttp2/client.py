"""`h2iot-agent fetch --engine nghttp2`: one nghttp process per page fetch, as the study ran it
(`nghttp -nas --no-push --no-dep -w N -W N`), with the trial header, statistics and a HAR file.

The record's CPU time, CPU % and peak RSS are the nghttp process's own (wait4), over its whole
life, start-up included; its window (`t_*_start_ns` .. `t_*_end_ns`, the marker, CPU %) is that
life too. `response_s`, `ttfb_s` and the resources' times are nghttp's own clock, from its start
(before name resolution) to the last byte. Peer SETTINGS and frame counts are not in nghttp's
output without `-v` and are left empty (`{}`, null).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from agent.client.connect import Target
from agent.client.options import RunPlan, TrialOptions
from agent.client.record import ClientRecord
from agent.client.run import print_record, print_unrun
from agent.conditions import TrialWatch
from agent.engines.nghttp2.errors import NghttpOutputError
from agent.engines.nghttp2.frame_log import frame_events
from agent.engines.nghttp2.har import parse_har
from agent.engines.nghttp2.options import NghttpOptions
from agent.engines.nghttp2.process import run_child
from agent.engines.nghttp2.record import build_record
from agent.engines.nghttp2.stats import parse_stats
from agent.engines.nghttp2.timing import ResourceTimes, resource_times
from agent.engines.nghttp2.tools import find_tool
from agent.errors import AgentError, UsageError
from agent.event_trace import trace_name, write_trace
from agent.marker import Marker, open_marker
from agent.site.manifest import SiteManifest
from agent.trial_control import TrialControl
from agent.workloads.page.client import download_manifest, read_manifest


@dataclass(frozen=True)
class NghttpPlan:
    """The run as any engine has it, and what its options mean for nghttp."""

    run: RunPlan
    nghttp: NghttpOptions


def _parse_output(stdout: bytes, har_path: Path) -> tuple[tuple[ResourceTimes, ...], int]:
    """The resources' times and the HAR file's size; NghttpOutputError if either is unreadable."""
    try:
        har_text = har_path.read_bytes()
    except OSError:
        raise NghttpOutputError("nghttp wrote no HAR file") from None
    har = parse_har(har_text.decode("utf-8", errors="replace"))
    rows = parse_stats(stdout.decode("utf-8", errors="replace"))
    return resource_times(har, rows), len(har_text)


class NghttpFetcher:
    def __init__(
        self, plan: NghttpPlan, nghttp: str, manifest: SiteManifest, marker: Marker
    ) -> None:
        self.run = plan.run
        self.options = plan.nghttp
        self.nghttp = nghttp
        self.manifest = manifest
        self.marker = marker
        self.page_path = Target.parse(plan.run.url).path

    def fetch(self, trial_id: str, repetition: int, workdir: Path) -> tuple[ClientRecord, int]:
        """The trial's record, and how many responses nghttp received."""
        har_path = workdir / f"{repetition}.har"
        events_dir = self.run.options.events_dir
        argv = self.options.argv(
            self.nghttp, self.run.url, trial_id, str(har_path), verbose=events_dir is not None
        )
        conditions = TrialWatch()  # the node's state, read outside the measured window
        self.marker.raise_line()
        child = run_child(argv, self.run.options.timeout_s)
        self.marker.lower_line()
        node = conditions.end()
        if events_dir is not None:
            write_trace(
                events_dir / trace_name(trial_id, "client"),
                (event.qlog(0) for event in frame_events(child.stdout.decode(errors="replace"))),
                vantage_point="client",
                trial_id=trial_id,
                # nghttp's times count from its own start, a little after the process's.
                reference_wall_ns=child.t_wall_start_ns,
                max_bytes=self.run.options.events_max_bytes,
            )
        started = time.perf_counter()
        times: tuple[ResourceTimes, ...] = ()
        har_bytes = 0
        failure: AgentError | None = None
        try:
            times, har_bytes = _parse_output(child.stdout, har_path)
        except NghttpOutputError as exc:
            failure = exc
        finally:
            har_path.unlink(missing_ok=True)
        record = build_record(
            trial_id=trial_id,
            repetition=repetition,
            url=self.run.url,
            protocol=self.run.options.protocol,
            options=self.options,
            child=child,
            times=times,
            failure=failure,
            manifest=self.manifest,
            page_path=self.page_path,
            har_bytes=har_bytes,
            command=tuple(argv),
            marker=self.marker.describe(),
            cpu_pin=self.run.options.cpu_pin,
            probe_overhead_s=time.perf_counter() - started,
            timeout_s=self.run.options.timeout_s,
        )
        return replace(record, conditions=node.to_dict()), len(times)


def _manifest(run: RunPlan) -> SiteManifest:
    if run.manifest_path is not None:
        return read_manifest(run.manifest_path)
    options = TrialOptions(timeout_s=run.options.timeout_s, insecure=True)
    return asyncio.run(download_manifest(Target.parse(run.url), options))


class Fetcher(Protocol):
    """One trial by a tool: its record, and how many responses it received."""

    def fetch(self, trial_id: str, repetition: int, workdir: Path) -> tuple[ClientRecord, int]: ...


def run_nghttp_fetches(plan: NghttpPlan) -> int:
    """Every fetch of the plan, one output line each; exit status 1 if any failed."""
    nghttp = find_tool("nghttp")
    return run_fetches(
        plan.run, lambda manifest, marker: NghttpFetcher(plan, nghttp, manifest, marker)
    )


def run_fetches(run: RunPlan, new_fetcher: Callable[[SiteManifest, Marker], Fetcher]) -> int:
    """Every page fetch of the run by the engine's tool (run_trials), the site manifest read
    first; exit status 1 if any failed."""
    try:
        manifest = _manifest(run)  # before any trial: never inside a timed fetch
    except UsageError:
        raise  # a --manifest file: the user's mistake
    except AgentError as exc:
        return print_unrun(run, str(exc))
    return run_trials(run, lambda marker: new_fetcher(manifest, marker))


def run_trials(run: RunPlan, new_fetcher: Callable[[Marker], Fetcher]) -> int:
    """Every trial of the run by the engine's tool, each bracketed by trial control when the
    run has it, one output line each; exit status 1 if any failed."""
    control = TrialControl(run.trial_control) if run.trial_control else None
    marker = open_marker(run.marker)
    failures = 0
    try:
        fetcher = new_fetcher(marker)
        with tempfile.TemporaryDirectory(prefix="h2iot-nghttp2-") as workdir:
            for repetition, trial_id in enumerate(run.trial_ids(), 1):
                if control is not None:
                    control.begin(trial_id)
                record, done = fetcher.fetch(trial_id, repetition, Path(workdir))
                failures += not record.ok
                # Printed first: a failed `end` must not lose the client's own record.
                print_record(record.to_dict(), run.json_lines)
                if control is not None:
                    control.end(trial_id, ok=record.ok, requests=done, responses_completed=done)
    finally:
        marker.close()
        if control is not None:
            control.close()
    return 1 if failures else 0
