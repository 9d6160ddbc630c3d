"""`h2iot-agent fetch --engine nghttp2 --protocol h3`: one `gtlsclient` process per page fetch,
the page's files from the site manifest all on one connection, at exact fixed windows.

As for nghttp, the record's CPU time, CPU % and peak RSS are the process's own (wait4) over its
whole life, and its window is that life (gtlsclient prints no timings: `response_s` is the
process's wall time). gtlsclient saves each body under the trial's download directory; they
are checked against the manifest by size and sha256 after it exits, outside the measured
window. UDP drops on the node (/proc/net/snmp RcvbufErrors) over the process are recorded.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import replace
from pathlib import Path

from agent.client.connect import Target
from agent.client.options import RunPlan
from agent.client.record import ClientRecord
from agent.conditions import TrialWatch
from agent.engines.nghttp2.client import run_fetches
from agent.engines.nghttp2.gtls import GtlsOptions
from agent.engines.nghttp2.process import run_child
from agent.engines.nghttp2.record import build_record
from agent.engines.nghttp2.timing import ResourceTimes
from agent.engines.nghttp2.tools import find_tool
from agent.errors import BodyMismatchError
from agent.event_trace import cut_trace, trace_name
from agent.marker import Marker
from agent.site.manifest import SiteManifest


class GtlsFlow:
    """The record's view of the options (agent.engines.nghttp2.record.ToolOptions)."""

    def __init__(self, options: GtlsOptions) -> None:
        self._options = options

    def announced(self) -> dict[str, int]:
        return self._options.announced()

    def settings_announced(self) -> dict[str, int]:
        return self._options.settings_announced()

    def flow_control(self) -> dict[str, object]:
        options = self._options
        return {
            "initial_window_size": options.stream_window_bytes,
            "connection_window": options.connection_window_bytes,
            # ngtcp2 grants a fixed window's credit again once half of it is consumed.
            "window_update_policy": "half",
            "datagram_bytes": options.datagram_bytes,
        }


def saved_bodies(
    directory: Path, manifest: SiteManifest, wall_s: float
) -> tuple[tuple[ResourceTimes, ...], BodyMismatchError | None]:
    """What gtlsclient saved (by each file's base name) against the manifest: a ResourceTimes
    per saved file, ending with the process (`wall_s`: the tool prints no times of its own),
    and the first sha256 mismatch."""
    times = []
    mismatch = None
    for stream, entry in enumerate(manifest.files):
        saved = directory / Path(entry.path).name
        try:
            body = saved.read_bytes()
        except OSError:
            continue
        times.append(ResourceTimes(4 * stream, "/" + entry.path, 200, len(body), 0.0, 0.0, wall_s))
        if (
            mismatch is None
            and len(body) == entry.size_bytes
            and hashlib.sha256(body).hexdigest() != entry.sha256
        ):
            mismatch = BodyMismatchError(f"GET /{entry.path}: sha256 differs from the manifest")
    return tuple(times), mismatch


class GtlsFetcher:
    def __init__(
        self, run: RunPlan, options: GtlsOptions, tool: str, manifest: SiteManifest, marker: Marker
    ) -> None:
        self.run = run
        self.options = options
        self.tool = tool
        self.manifest = manifest
        self.marker = marker
        self.target = Target.parse(run.url)
        base = run.url.rstrip("/")
        self.urls = [f"{base}/{entry.path}" for entry in manifest.files]

    def fetch(self, trial_id: str, repetition: int, workdir: Path) -> tuple[ClientRecord, int]:
        download = workdir / str(repetition)
        download.mkdir()
        events_dir = self.run.options.events_dir
        qlog_file = None if events_dir is None else events_dir / trace_name(trial_id, "client")
        if qlog_file is not None:
            qlog_file.parent.mkdir(parents=True, exist_ok=True)
        argv = self.options.client_argv(
            self.tool,
            self.target.host,
            self.target.port,
            self.urls,
            str(download),
            qlog_file=None if qlog_file is None else str(qlog_file),
        )
        conditions = TrialWatch()  # the node's state, read outside the measured window
        self.marker.raise_line()
        child = run_child(argv, self.run.options.timeout_s)
        self.marker.lower_line()
        node = conditions.end()
        if qlog_file is not None:
            cut_trace(qlog_file, self.run.options.events_max_bytes)
        started = time.perf_counter()
        try:
            times, mismatch = saved_bodies(download, self.manifest, child.wall_s)
        finally:
            shutil.rmtree(download, ignore_errors=True)
        record = build_record(
            trial_id=trial_id,
            repetition=repetition,
            url=self.run.url,
            protocol=self.run.options.protocol,
            options=GtlsFlow(self.options),
            child=child,
            times=times,
            failure=mismatch,
            manifest=self.manifest,
            page_path=self.target.path,
            har_bytes=0,
            command=tuple(argv),
            marker=self.marker.describe(),
            cpu_pin=self.run.options.cpu_pin,
            probe_overhead_s=time.perf_counter() - started,
            timeout_s=self.run.options.timeout_s,
            tool="gtlsclient",
            verification="sha256",
        )
        transport = {
            "protocol": self.run.options.protocol,
            "datagram_bytes": self.options.datagram_bytes,
            "connection_window_bytes": self.options.connection_window_bytes,
            # The node's drops over the trial, from its kernel counts (agent.kernel_counters).
            "udp_rcvbuf_errors": node.kernel.counts["udp_rcvbuf_errors"],
        }
        record = replace(
            record,
            conditions=node.to_dict(),
            tls_version="TLSv1.3",
            transport=transport,
            sent=None,
        )
        return record, len(times)


def run_gtls_fetches(run: RunPlan, options: GtlsOptions) -> int:
    """Every fetch of the run by gtlsclient; exit status 1 if any failed."""
    tool = find_tool("gtlsclient")
    return run_fetches(
        run, lambda manifest, marker: GtlsFetcher(run, options, tool, manifest, marker)
    )
