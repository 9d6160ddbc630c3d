"""The blob workload's server side: GET or HEAD `/blob/<size>` answers `size` deterministic
bytes (agent.workloads.blob.body); the size goes up to the spec's size_bytes maximum, anything
else under any other path is 404. Bodies are built once per size and kept, so no trial pays
for building one after its first request of that size."""

from __future__ import annotations

from collections import OrderedDict
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
from agent.workloads.blob.body import PATH_PREFIX, blob_body
from agent.workloads.blob.spec import BLOB
from agent.workloads.spec import ParamError

_SIZE = BLOB.param("size_bytes")
# Bodies kept at once: a sweep over sizes meets each again; the largest is 64 MiB.
_KEPT_BODIES = 4
_CONTENT_TYPE = (b"content-type", b"application/octet-stream")


class BlobHandler:
    def __init__(self) -> None:
        self._bodies: OrderedDict[int, memoryview] = OrderedDict()

    def handle(self, request: Request) -> Reply:
        if request.method not in GET_OR_HEAD:
            return METHOD_NOT_ALLOWED
        path = request.path.split("?", 1)[0]
        if not path.startswith(PATH_PREFIX) or not path[len(PATH_PREFIX) :].isdigit():
            return NOT_FOUND
        try:
            size = int(_SIZE.parse(path[len(PATH_PREFIX) :]))
        except ParamError:
            return NOT_FOUND
        return Reply(200, (_CONTENT_TYPE, SERVER_HEADER), self._body(size))

    def _body(self, size: int) -> memoryview:
        body = self._bodies.pop(size, None)
        if body is None:
            body = memoryview(blob_body(size))
            while len(self._bodies) >= _KEPT_BODIES:
                self._bodies.popitem(last=False)
        self._bodies[size] = body
        return body


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    if root is not None:
        raise UsageError("--root is for the page workload; blob serves no files")
    return BlobHandler()
