"""What the HTTP/2 server asks of a workload: given a request, a reply. Pure data and a Protocol.

A handler decides status, headers and body; the connection does the HTTP/2 part: it adds
`:status` and `content-length`, sends headers only for HEAD or an empty body, and streams the
body as DATA under flow control, slicing the buffer it is given (no copy, no per-frame call
back into the handler). A handler runs on the event loop and must not block; a body it builds
per request costs CPU inside the trial's window, so handlers build bodies once and reuse them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agent import __version__

GET_OR_HEAD = (b"GET", b"HEAD")
SERVER_HEADER = (b"server", f"h2iot-agent/{__version__}".encode())
_EMPTY = memoryview(b"")


@dataclass(frozen=True)
class Request:
    method: bytes  # b"GET", b"HEAD", ...
    path: str  # `:path` as sent, query included
    headers: Mapping[bytes, bytes]  # every header field, pseudo-headers included


@dataclass(frozen=True)
class Reply:
    status: int
    headers: tuple[tuple[bytes, bytes], ...] = ()  # sent after :status and content-length
    body: memoryview = field(default=_EMPTY)  # streamed as it is; its length is content-length


NOT_FOUND = Reply(404)
METHOD_NOT_ALLOWED = Reply(405, ((b"allow", b", ".join(GET_OR_HEAD)),))


class Handler(Protocol):
    def handle(self, request: Request) -> Reply: ...
