"""The periodic workload's server side: `/periodic/<response_bytes>` answers that many
deterministic bytes (agent.workloads.bodies) to a GET, and to a POST once its whole body has
been read (a report the server consumes). Anything else is 404 or 405.

A POST that came in 0-RTT early data never reaches it: the server answers 425 Too Early
(agent.server.handler.TOO_EARLY) and counts it in the trial's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.errors import UsageError
from agent.server.exchange import BodyTooLarge, ServerExchange
from agent.server.handler import NOT_FOUND, SERVER_HEADER, Handler, Reply, Streamed
from agent.server.request import Request
from agent.workloads.bodies import Bodies, size_in_path
from agent.workloads.periodic.protocol import PATH_PREFIX
from agent.workloads.periodic.spec import PERIODIC

_RESPONSE = PERIODIC.param("response_bytes")
_REQUEST = PERIODIC.param("request_bytes")
_METHODS = (b"GET", b"POST")
_NOT_ALLOWED = Reply(405, ((b"allow", b", ".join(_METHODS)),))
_CONTENT_TYPE = (b"content-type", b"application/octet-stream")


class PeriodicHandler:
    def __init__(self) -> None:
        self._bodies = Bodies()

    def handle(self, request: Request) -> Reply | Streamed:
        if request.method not in _METHODS:
            return _NOT_ALLOWED
        size = size_in_path(request.path, PATH_PREFIX, _RESPONSE)
        if size is None:
            return NOT_FOUND
        body = self._bodies.of(size)
        if request.method == b"GET":
            return Reply(200, (_CONTENT_TYPE, SERVER_HEADER), body)
        return Streamed(lambda exchange: _consume(exchange, body), int(_REQUEST.maximum or 0))


async def _consume(exchange: ServerExchange, body: memoryview) -> None:
    """Read the report whole, then answer it."""
    try:
        await exchange.read_body(int(_REQUEST.maximum or 0))
    except BodyTooLarge:
        return  # the connection answered 413 and refused the rest
    length = (b"content-length", str(len(body)).encode())
    exchange.send_headers(200, (_CONTENT_TYPE, SERVER_HEADER, length), end_stream=not body)
    if body:
        exchange.send(body, end_stream=True)


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    if root is not None:
        raise UsageError("--root is for the page workload; periodic serves no files")
    return PeriodicHandler()
