"""The page workload's part of a trial record, for either engine: its params (the site's, from
its manifest), its metrics, and the fields the page's record has always had."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from agent.site.manifest import SiteManifest


@dataclass(frozen=True)
class ResourceTiming:
    path: str
    status: int
    size_bytes: int
    start_s: float
    ttfb_s: float
    end_s: float
    verified: bool


def page_params(manifest: SiteManifest) -> dict[str, object]:
    """The setup params the page was built with: what its trials ran with."""
    return {"site_seed": manifest.seed, "total_bytes": manifest.total_bytes}


def page_metrics(resources: tuple[ResourceTiming, ...]) -> dict[str, object]:
    return {
        "resource_count": sum(r.verified for r in resources),
        "body_bytes": sum(r.size_bytes for r in resources),
    }


def page_extra(
    resources: tuple[ResourceTiming, ...],
    verification: str,
    process_wall_s: float | None = None,
    command: tuple[str, ...] | None = None,
) -> dict[str, object]:
    """`resources`, `body_bytes`, how bodies were checked (sha256, or size for nghttp2), and
    the nghttp2 engine's process wall time and command line (None for the h2 engine)."""
    return {
        "resources": [asdict(r) for r in resources],
        "body_bytes": sum(r.size_bytes for r in resources),
        "verification": verification,
        "process_wall_s": process_wall_s,
        "command": None if command is None else list(command),
    }
