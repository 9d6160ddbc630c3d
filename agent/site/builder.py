"""Build the test page: `index.html`, 1 stylesheet, 2 scripts and 4 JPEG photos, like the study's.

`render_site` is pure (seed and size in, file bytes out); `build_site` writes them and the
manifest. The images carry most of the bytes; the text files get fixed shares with floors, and
the page itself absorbs the last few bytes, so the site's total is exactly `total_bytes`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from agent.errors import SiteError
from agent.site._stream import ByteStream
from agent.site.content_types import content_type_for
from agent.site.jpeg import encode_jpeg
from agent.site.limits import DEFAULT_TOTAL_BYTES, MAX_TOTAL_BYTES, MIN_TOTAL_BYTES
from agent.site.manifest import MANIFEST_NAME, SiteFile, SiteManifest
from agent.site.text import PageImage, render_app_js, render_css, render_html, render_vendor_js

INDEX = "index.html"
STYLESHEET = "css/style.css"
SCRIPTS = ("js/vendor.js", "js/app.js")
# (path, share of the image bytes in percent, aspect ratio): photos of different sizes and shapes.
_IMAGES = (
    ("img/photo-1.jpg", 31, (3, 2)),
    ("img/photo-2.jpg", 27, (4, 3)),
    ("img/photo-3.jpg", 23, (16, 9)),
    ("img/photo-4.jpg", 19, (2, 3)),
)
_PER_MILLE = 1000


@dataclass(frozen=True)
class _TextSizes:
    css_bytes: int
    vendor_js_bytes: int
    app_js_bytes: int
    html_bytes: int  # nominal: the page absorbs what the images leave of their share

    @classmethod
    def for_total(cls, total_bytes: int) -> _TextSizes:
        def share(per_mille: int, floor: int) -> int:
            return max(floor, total_bytes * per_mille // _PER_MILLE)

        return cls(share(6, 2048), share(18, 2048), share(12, 2048), share(2, 4096))


def render_site(*, seed: int, total_bytes: int) -> list[tuple[str, bytes]]:
    """Every file of the site as (relative path, bytes), the index first."""
    if not MIN_TOTAL_BYTES <= total_bytes <= MAX_TOTAL_BYTES:
        raise SiteError(
            f"total bytes {total_bytes} is outside the site sizes this builder makes "
            f"({MIN_TOTAL_BYTES} .. {MAX_TOTAL_BYTES})"
        )
    root = ByteStream(f"h2iot-site/v1/seed={seed}")
    sizes = _TextSizes.for_total(total_bytes)
    files = [
        (STYLESHEET, render_css(root.child("css"), sizes.css_bytes)),
        (SCRIPTS[0], render_vendor_js(root.child("vendor-js"), sizes.vendor_js_bytes)),
        (SCRIPTS[1], render_app_js(root.child("app-js"), sizes.app_js_bytes)),
    ]
    image_bytes = total_bytes - sizes.css_bytes - sizes.vendor_js_bytes - sizes.app_js_bytes
    image_bytes -= sizes.html_bytes
    images: list[PageImage] = []
    for path, share, aspect in _IMAGES:
        image = encode_jpeg(root.child(path), image_bytes * share // 100, aspect)
        files.append((path, image.data))
        images.append(PageImage(path, image.width_px, image.height_px))
    html = render_html(
        root.child("html"),
        total_bytes - sum(len(data) for _, data in files),
        title=f"h2iot test page (seed {seed})",
        stylesheet=STYLESHEET,
        scripts=SCRIPTS,
        images=images,
    )
    return [(INDEX, html), *files]


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as error:
        raise SiteError(f"{path}: cannot write the site: {error.strerror}") from None


def build_site(
    directory: Path, *, seed: int = 0, total_bytes: int = DEFAULT_TOTAL_BYTES
) -> SiteManifest:
    """Write the site and `DIR/manifest.json` into `directory` (created if needed)."""
    files = render_site(seed=seed, total_bytes=total_bytes)
    directory = Path(directory)
    manifest_path = directory / MANIFEST_NAME
    # The manifest goes last and atomically, so no manifest ever describes a half-written site.
    try:
        manifest_path.unlink(missing_ok=True)
    except OSError as error:
        raise SiteError(f"{manifest_path}: cannot replace the manifest: {error.strerror}") from None
    entries = []
    for path, data in files:
        _write(directory / path, data)
        digest = hashlib.sha256(data).hexdigest()
        entries.append(SiteFile(path, len(data), digest, content_type_for(path)))
    manifest = SiteManifest(
        index=INDEX,
        files=tuple(entries),
        seed=seed,
        total_bytes=sum(entry.size_bytes for entry in entries),
    )
    staging = directory / f".{MANIFEST_NAME}.tmp"
    _write(staging, manifest.to_json().encode())
    os.replace(staging, manifest_path)
    return manifest
