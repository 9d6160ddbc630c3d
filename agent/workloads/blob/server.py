"""The blob workload's server side: GET or HEAD `/blob/<size>` answers `size` deterministic
bytes (agent.workloads.bodies); the size goes up to the spec's size_bytes maximum, anything
else under any other path is 404. Bodies are built once per size and kept, so no trial pays
for building one after its first request of that size."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.errors import UsageError
from agent.server.handler import (
    GET_OR_HEAD,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    SERVER_HEADER,
    Handler,
    Reply,
)
from agent.server.request import Request
from agent.workloads.blob.body import PATH_PREFIX
from agent.workloads.blob.spec import BLOB
from agent.workloads.bodies import Bodies, size_in_path

_SIZE = BLOB.param("size_bytes")
# Bodies kept at once: a sweep over sizes meets each again; the largest is 64 MiB.
_KEPT_BODIES = 4
_CONTENT_TYPE = (b"content-type", b"application/octet-stream")


class BlobHandler:
    def __init__(self) -> None:
        self._bodies = Bodies(_KEPT_BODIES)

    def handle(self, request: Request) -> Reply:
        if request.method not in GET_OR_HEAD:
            return METHOD_NOT_ALLOWED
        size = size_in_path(request.path, PATH_PREFIX, _SIZE)
        if size is None:
            return NOT_FOUND
        return Reply(200, (_CONTENT_TYPE, SERVER_HEADER), self._bodies.of(size))


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    if root is not None:
        raise UsageError("--root is for the page workload; blob serves no files")
    return BlobHandler()
