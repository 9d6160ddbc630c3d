"""The files the server serves, held in memory once read (a page is a few MB), so the hot path
slices a buffer instead of touching the disk while a trial is timed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent.paths import resolve_under_root
from agent.site.content_types import content_type_for


@dataclass(frozen=True)
class Resource:
    body: memoryview
    content_type: str


class ContentStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[Path, tuple[int, int, Resource]] = {}

    def lookup(self, raw_path: str) -> Resource | None:
        path = resolve_under_root(self.root, raw_path)
        if path is None:
            return None
        try:
            stat = path.stat()
        except OSError:
            return None
        cached = self._cache.get(path)
        if cached is not None and cached[0] == stat.st_mtime_ns and cached[1] == stat.st_size:
            return cached[2]
        try:
            data = path.read_bytes()
        except OSError:
            return None
        resource = Resource(memoryview(data), content_type_for(os.fspath(path)))
        self._cache[path] = (stat.st_mtime_ns, stat.st_size, resource)
        return resource
