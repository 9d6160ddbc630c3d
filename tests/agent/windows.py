"""The study's window sweep and nghttp2's way of expressing it (2^N - 1 bytes)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from agent.site import load_manifest

STUDY_WINDOWS = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535]


def nghttp2_bits(window: int) -> int:
    """The N for `-w N` whose 2^N - 1 is closest to `window` (256 -> 8, i.e. 255 bytes)."""
    return max(1, round(math.log2(window + 1)))


def verify_downloads(site: Path, directory: Path) -> list[str]:
    """Files nghttp/curl saved by their basename, checked against the manifest; returns names."""
    checked = []
    for entry in load_manifest(site).files:
        if entry.path == "manifest.json":
            continue
        saved = directory / Path(entry.path).name
        data = saved.read_bytes()
        assert len(data) == entry.size_bytes, f"{entry.path}: {len(data)} bytes"
        assert hashlib.sha256(data).hexdigest() == entry.sha256, f"{entry.path}: sha256 differs"
        checked.append(entry.path)
    return checked
