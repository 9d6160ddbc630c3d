"""The test site: a deterministic page like the reference study's, and its manifest.

`build_site(DIR)` writes `index.html`, one stylesheet, two scripts and four baseline JPEG photos
(about 7 MB by default) plus `DIR/manifest.json`; `load_manifest(DIR)` reads the manifest back.
The same seed and size always give byte-identical files, on any Python and platform.

The builder is imported on first use only: its JPEG tables hold about 10 MiB, which every fetch
and serve process (whose peak memory is a measured result) would otherwise carry unused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.site.content_types import content_type_for
from agent.site.limits import DEFAULT_TOTAL_BYTES, MIN_TOTAL_BYTES
from agent.site.manifest import (
    MANIFEST_NAME,
    SiteFile,
    SiteManifest,
    load_manifest,
    parse_manifest,
)

if TYPE_CHECKING:
    from agent.site.builder import build_site, render_site

_FROM_BUILDER = frozenset({"build_site", "render_site"})


def __getattr__(name: str) -> Any:
    if name in _FROM_BUILDER:
        from agent.site import builder  # noqa: PLC0415

        return getattr(builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_TOTAL_BYTES",
    "MANIFEST_NAME",
    "MIN_TOTAL_BYTES",
    "SiteFile",
    "SiteManifest",
    "build_site",
    "content_type_for",
    "load_manifest",
    "parse_manifest",
    "render_site",
]
