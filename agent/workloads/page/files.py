"""The files the server serves, held in memory once read (a page is a few MB), so the hot path
slices a buffer instead of touching the disk while a trial is timed; and the handler that
answers GET and HEAD with them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent.errors import UsageError
from agent.paths import resolve_under_root
from agent.server.handler import GET_OR_HEAD, METHOD_NOT_ALLOWED, NOT_FOUND, SERVER_HEADER, Reply
from agent.server.request import Request
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


class FileHandler:
    """GET and HEAD of the regular files under `root`; anything else 404 or 405."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise UsageError(f"--root {root} is not a directory")
        self.content = ContentStore(root)

    def handle(self, request: Request) -> Reply:
        if request.method not in GET_OR_HEAD:
            return METHOD_NOT_ALLOWED
        resource = self.content.lookup(request.path)
        if resource is None:
            return NOT_FOUND
        return Reply(
            200, ((b"content-type", resource.content_type.encode()), SERVER_HEADER), resource.body
        )
