"""What the HTTP/2 server asks of a workload: given a request, a reply. Pure data and a Protocol.

A handler decides status, headers and body; the connection does the HTTP/2 part: it adds
`:status` and `content-length`, sends headers only for HEAD or an empty body, and streams the
body as DATA under flow control, slicing the buffer it is given (no copy, no per-frame call
back into the handler). A handler runs on the event loop and must not block; a body it builds
per request costs CPU inside the trial's window, so handlers build bodies once and reuse them.

A handler that needs the request body, or sends its response piece by piece, answers `Streamed`
instead: the connection runs its coroutine with a `ServerExchange` (agent.server.exchange) for
the stream. A `Reply` keeps the fast path above, and its request body is dropped unread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agent.server.exchange import ServerExchange

from agent import __version__
from agent.server.request import Request

GET_OR_HEAD = (b"GET", b"HEAD")
SERVER_HEADER = (b"server", f"h2iot-agent/{__version__}".encode())
_EMPTY = memoryview(b"")


@dataclass(frozen=True)
class Reply:
    status: int
    headers: tuple[tuple[bytes, bytes], ...] = ()  # sent after :status and content-length
    body: memoryview = field(default=_EMPTY)  # streamed as it is; its length is content-length


NOT_FOUND = Reply(404)
METHOD_NOT_ALLOWED = Reply(405, ((b"allow", b", ".join(GET_OR_HEAD)),))
TOO_EARLY = Reply(HTTPStatus.TOO_EARLY)
"""RFC 8470: the answer to a request that came in 0-RTT early data (`Request.early_data`) and
is not safe to act on there, since whoever captured it can replay it: the client sends it again
once the handshake is done. The server answers it so to every method but GET and HEAD, before
any handler sees it."""


def acts_early(request: Request) -> bool:
    """Whether the server acts on `request` as it came: not early, or early and safe (RFC
    9110 9.2.1: GET and HEAD change nothing, so a replay of them is harmless)."""
    return not request.early_data or request.method in GET_OR_HEAD


ExchangeRun = Callable[["ServerExchange"], Awaitable[None]]


@dataclass(frozen=True)
class Streamed:
    """Run `run(exchange)` as a task for this stream. It must end the stream (END_STREAM,
    trailers or a reset); if it returns without, or raises, the connection resets the stream
    with INTERNAL_ERROR and logs it once per connection. A request body over
    `body_limit_bytes` (by content-length, or as it arrives) is answered 413 by the connection
    and the rest refused with RST_STREAM(NO_ERROR); it is never buffered."""

    run: ExchangeRun
    body_limit_bytes: int | None = None


class Handler(Protocol):
    """`handle` answers every request. A handler may also have `extra_settings` (a mapping of
    canonical setting names to values, e.g. {"enable_connect_protocol": 1} for RFC 8441),
    read once when the server starts and announced in every connection's first SETTINGS."""

    def handle(self, request: Request) -> Reply | Streamed: ...
