"""The JSON record of one page fetch, the agent's output contract with the controller."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ResourceTiming:
    path: str
    status: int
    size_bytes: int
    start_s: float
    ttfb_s: float
    end_s: float
    verified: bool


@dataclass(frozen=True)
class FetchRecord:
    """One page fetch, by either engine. Times relative to the fetch start are in seconds;
    clocks in ns."""

    ok: bool
    error: str | None
    trial_id: str
    repetition: int
    url: str
    engine: str
    agent_version: str
    tls: bool
    settings: dict[str, int]
    flow_control: dict[str, object]
    peer_settings: dict[str, int]
    response_s: float
    ttfb_s: float
    resources: tuple[ResourceTiming, ...]
    body_bytes: int
    cpu_user_s: float
    cpu_sys_s: float
    cpu_s: float
    cpu_pct: float
    rss_peak_bytes: int
    rss_peak_is_fetch: bool
    sent: dict[str, object] | None  # None where the engine cannot count (nghttp2: no frames)
    received: dict[str, object] | None
    window_updates_sent: int | None
    t_wall_start_ns: int
    t_wall_end_ns: int
    t_mono_start_ns: int
    t_mono_end_ns: int
    probe_overhead_s: float
    cpu_pin: int | None
    marker: str
    verification: str = "sha256"  # how bodies were checked: sha256, or size (nghttp2)
    process_wall_s: float | None = None  # nghttp2: the nghttp process's whole life
    command: tuple[str, ...] | None = None  # nghttp2: the command line that ran

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
