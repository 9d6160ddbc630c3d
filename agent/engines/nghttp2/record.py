"""The fetch record of one nghttp run: the same fields as the h2 engine's (agent/README.md), plus
what only this engine has. Pure: built from the child's accounting and nghttp's parsed output.

nghttp discards bodies (`-n`) and cannot save concurrent ones apart, so bodies are verified by
size only (the HAR's exact body byte counts against the manifest): `verification` says "size"
where the h2 engine checks sha256. Frames are not counted (that needs `nghttp -v`, which costs
nghttp CPU); `sent.bytes` is what nghttp wrote to its socket (its write(2) total, wchar, as
reaping it adds to the agent's /proc/self/io, less what it wrote to stdout, stderr and the HAR
file). The record's
`unavailable` maps each field left empty to why.
"""

from __future__ import annotations

from typing import Protocol, TypedDict

from agent import __version__
from agent.client.record import ClientRecord
from agent.engines.nghttp2.process import ChildOutcome
from agent.engines.nghttp2.timing import ResourceTimes
from agent.errors import AgentError
from agent.protocols import protocol_spec
from agent.site.manifest import SiteManifest
from agent.workloads.page.record import (
    ResourceTiming,
    page_extra,
    page_metrics,
    page_params,
)
from agent.workloads.page.spec import PAGE

ENGINE = "nghttp2"
VERIFICATION = "size"
_NEEDS_VERBOSE = "nghttp prints frames and SETTINGS only with -v, which costs nghttp CPU"
# The announcement is read from the tool's argv; what the peer announced is not seen.
_PEER_UNSEEN = (
    "the tools print the peer's SETTINGS or transport parameters only verbosely (nghttp -v, "
    "gtlsclient without -q), which costs their CPU"
)
# The fields this engine never fills, and why.
NOT_COUNTED: dict[str, str] = {
    "sent.frames": _NEEDS_VERBOSE,
    "sent.frame_bytes": _NEEDS_VERBOSE,
    "received": _NEEDS_VERBOSE,
    "peer_settings": _NEEDS_VERBOSE,
    "settings_received": _PEER_UNSEEN,
    "window_updates_sent": _NEEDS_VERBOSE,
    # From outside, a trial is nghttp's start and exit: when its handshake ended and its last
    # byte came, nghttp timestamps only with -v.
    "phases": "nghttp prints its handshake's and frames' times only with -v, which costs "
    "nghttp CPU",
}


def verify(
    times: tuple[ResourceTimes, ...], manifest: SiteManifest, page_path: str, tool: str = "nghttp"
) -> tuple[tuple[ResourceTiming, ...], str | None]:
    """Each resource against the manifest by size; every file of the page must be there.
    Returns the resources and the first error, if any."""
    files = manifest.by_path()
    resources = []
    error = None
    seen = set()
    for t in times:
        relative = t.path.lstrip("/")
        if not relative or relative.endswith("/"):
            relative += manifest.index
        expected = files.get(relative)
        problem = None
        if t.status != 200:
            problem = f"GET {t.path} answered {t.status}"
        elif expected is None:
            problem = f"GET {t.path}: not in the site manifest"
        elif t.size_bytes != expected.size_bytes:
            problem = f"GET {t.path}: {t.size_bytes} bytes, manifest says {expected.size_bytes}"
        error = error or problem
        seen.add(relative)
        resources.append(
            ResourceTiming(
                t.path, t.status, t.size_bytes, t.start_s, t.ttfb_s, t.end_s, not problem
            )
        )
    missing = [f.path for f in manifest.files if f.path not in seen]
    if error is None and not seen:
        error = f"{tool} fetched none of the page's files"
    elif error is None and missing:
        error = (
            f"{tool} fetched {len(seen)} of the page's {len(manifest.files)} files "
            f"(page {page_path}); missing {', '.join(missing)}"
        )
    return tuple(resources), error


def unavailable_fields(child: ChildOutcome, written: int | None) -> dict[str, str]:
    """Each field of the record this run could not fill -> why."""
    if written is not None:
        return dict(NOT_COUNTED)
    why = child.io_unavailable or "/proc/self/io has no wchar"
    return {"sent": f"nghttp's write(2) total is unreadable: {why}", **NOT_COUNTED}


def socket_bytes_written(child: ChildOutcome, har_bytes: int) -> int | None:
    """nghttp's write(2) total less its stdout, stderr and HAR file: what went to its socket."""
    if child.io is None or "wchar" not in child.io:
        return None
    return child.io["wchar"] - len(child.stdout) - len(child.stderr) - har_bytes


class ToolOptions(Protocol):
    """What a tool's options say of the trial: what it announced, its flow control."""

    def announced(self) -> dict[str, int]: ...
    def settings_announced(self) -> dict[str, int]: ...
    def flow_control(self) -> dict[str, object]: ...


class ToolFields(TypedDict):
    """The record's fields every trial of the engine's tools fills alike."""

    url: str
    workload: str
    engine: str
    agent_version: str
    protocol: str
    tls: bool
    settings: dict[str, int]
    flow_control: dict[str, object]
    peer_settings: dict[str, int]
    settings_announced: dict[str, int]


def tool_fields(url: str, protocol: str, workload: str, options: ToolOptions) -> ToolFields:
    return ToolFields(
        url=url,
        workload=workload,
        engine=ENGINE,
        agent_version=__version__,
        protocol=protocol,
        tls=protocol_spec(protocol).tls,
        settings=options.announced(),
        flow_control=options.flow_control(),
        peer_settings={},
        settings_announced=options.settings_announced(),
    )


def build_record(
    *,
    trial_id: str,
    repetition: int,
    url: str,
    protocol: str,
    options: ToolOptions,
    child: ChildOutcome,
    times: tuple[ResourceTimes, ...],
    failure: AgentError | None,
    manifest: SiteManifest,
    page_path: str,
    har_bytes: int,
    command: tuple[str, ...],
    marker: str,
    cpu_pin: int | None,
    probe_overhead_s: float,
    timeout_s: float,
    tool: str = "nghttp",
    verification: str = VERIFICATION,
) -> ClientRecord:
    """`tool`: the program that fetched (nghttp, or gtlsclient over HTTP/3); `verification`:
    how its bodies were checked (size, or sha256 where the tool saved them)."""
    resources, error = verify(times, manifest, page_path, tool)
    if child.timed_out:
        error = f"timeout: page fetch took longer than {timeout_s:g} s ({tool} killed)"
    elif child.exit_status != 0:
        error = f"{tool} exited {child.exit_status}"
    elif failure is not None:
        error = str(failure)
    if error is not None and not child.timed_out and child.stderr.strip():
        # nghttp exits 0 even when it cannot connect; its own words say why.
        said = child.stderr.decode(errors="replace").strip().splitlines()
        error = f"{error} ({tool}: {' / '.join(said[:2])})"
    cpu_s = child.cpu_user_s + child.cpu_sys_s
    wall_s = child.wall_s
    first = next((r for r in times if r.stream_id == 1), None)
    written = socket_bytes_written(child, har_bytes)
    return ClientRecord(
        ok=error is None,
        error=error,
        trial_id=trial_id,
        repetition=repetition,
        # nghttp fetches the page workload's files only
        **tool_fields(url, protocol, PAGE.kind, options),
        response_s=max((r.end_s for r in times), default=wall_s),
        ttfb_s=first.ttfb_s if first else None,
        cpu_user_s=child.cpu_user_s,
        cpu_sys_s=child.cpu_sys_s,
        cpu_s=cpu_s,
        cpu_pct=100.0 * cpu_s / wall_s if wall_s > 0 else 0.0,
        rss_peak_bytes=child.rss_peak_bytes,
        rss_peak_is_fetch=True,
        sent=None if written is None else {"bytes": written, "frames": None, "frame_bytes": None},
        received=None,
        window_updates_sent=None,
        t_wall_start_ns=child.t_wall_start_ns,
        t_wall_end_ns=child.t_wall_start_ns + (child.t_mono_end_ns - child.t_mono_start_ns),
        t_mono_start_ns=child.t_mono_start_ns,
        t_mono_end_ns=child.t_mono_end_ns,
        probe_overhead_s=probe_overhead_s,
        cpu_pin=cpu_pin,
        marker=marker,
        params=page_params(manifest),
        metrics=page_metrics(resources),
        extra={
            **page_extra(resources, verification, wall_s, command),
            "unavailable": unavailable_fields(child, written),
        },
    )
