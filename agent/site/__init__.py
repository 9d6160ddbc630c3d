"""The test site: a deterministic page like the reference study's, and its manifest.

`build_site(DIR)` writes `index.html`, one stylesheet, two scripts and four baseline JPEG photos
(about 7 MB by default) plus `DIR/manifest.json`; `load_manifest(DIR)` reads the manifest back.
The same seed and size always give byte-identical files, on any Python and platform.
"""

from __future__ import annotations

from agent.site.builder import DEFAULT_TOTAL_BYTES, MIN_TOTAL_BYTES, build_site, render_site
from agent.site.content_types import content_type_for
from agent.site.manifest import (
    MANIFEST_NAME,
    SiteFile,
    SiteManifest,
    load_manifest,
    parse_manifest,
)

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
