"""The api workload as a Starlette app: the ecosystem's production stack (hypercorn serves it
over HTTP/2) answering the same REST semantics (agent.workloads.api.rest) over the same
database and data layer as the agent's own server. Starlette reads the body; its router sends
every request to the one endpoint, which finds the target with the agent's own parsers
(agent.workloads.api.parse), so both stacks refuse the same requests alike. The endpoint is
`async def`, so it runs on the event loop as the agent's handler does (a threadpool hop per
request would cost more than the query it frees the loop from).

Hypercorn 0.18 ends the whole connection (a KeyError in its h2 protocol; hypercorn issue #329)
when DATA arrives for a stream whose response has ended, so this app never ends a response
while its request's body is still coming: a body the API does not take is read to its end and
dropped first, and one over the limit gets its 413 at once, the stream's end held back until
the rest has come and been dropped. (The agent's own server resets such a stream instead, which
ASGI cannot ask for; hypercorn gives the client credit for every byte at once either way.)

`Activity` sees every request and response of the app: the hypercorn engine's trial records
take their request counts and serve window from it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import request_response
from starlette.types import Receive, Scope, Send

from agent.probe import ProbeSample, sample
from agent.workloads.api.parse import declared_over_limit, locate
from agent.workloads.api.rest import Answer, Api, drop, read_within

_JSON = "application/json"
_GONE = Response(status_code=400)  # never delivered: its stream was reset


@dataclass
class Activity:
    """Requests and responses since `reset`, and the process's accounting when the first began
    and the last ended: a trial's serve window, as the agent's own server's ledger has it."""

    requests: int = 0
    responses: int = 0
    first: ProbeSample | None = None
    last: ProbeSample | None = None

    def reset(self) -> None:
        self.requests = self.responses = 0
        self.first = self.last = None

    def began(self) -> None:
        self.requests += 1
        if self.first is None:
            self.first = sample()

    def ended(self) -> None:
        self.responses += 1
        self.last = sample()


def _target_path(scope: Scope) -> str:
    """`:path` as the client sent it, decoded as the agent's own server decodes it. Not
    hypercorn's `path`, which is percent-decoded: the agent's own server has no route for
    `/api/customers/%31`, so it must not be row 1 here."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope["query_string"]
    return (raw + b"?" + query if query else raw).decode("utf-8", errors="replace")


def _declared(request: Request) -> bytes | None:
    value = request.headers.get("content-length")
    return None if value is None else value.encode("latin-1")  # as Starlette decoded it


def _headers(answer: Answer) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in answer.headers}


def _response(answer: Answer) -> Response:
    if answer.status == 204:
        return Response(status_code=204, headers=_headers(answer))
    return Response(answer.body, answer.status, _headers(answer), media_type=_JSON)


class _EarlyRefusal(Response):
    """A refusal sent while its request's body is still coming: status, headers and JSON go
    out at once, the stream's end once the rest of the body has come and been dropped."""

    def __init__(self, answer: Answer, rest: AsyncIterator[bytes]) -> None:
        super().__init__(answer.body, answer.status, _headers(answer), media_type=_JSON)
        self._rest = rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        try:
            await drop(self._rest)
        except ClientDisconnect:
            return  # the client reset the stream: it has its answer, nothing is left to end
        await send({"type": "http.response.body", "body": b""})


async def _answer(api: Api, request: Request) -> Response:
    target = locate(_target_path(request.scope))
    method = request.method.encode()
    chunks = request.stream()
    if target is None or not target.takes_body(method):
        await drop(chunks)  # a body nobody asked for (hypercorn: see the module's doc)
        return _response(api.answer(method, target))
    body = None
    if not declared_over_limit(_declared(request), api.body_limit_bytes):
        body = await read_within(chunks, api.body_limit_bytes)
    if body is None:
        return _EarlyRefusal(api.body_too_large(), chunks)
    return _response(api.answer(method, target, body))


def starlette_app(api: Api, activity: Activity | None = None) -> Starlette:
    seen = activity or Activity()

    async def endpoint(request: Request) -> Response:
        seen.began()
        try:
            return await _answer(api, request)
        except ClientDisconnect:
            # The client reset the stream: nobody to answer (hypercorn drops what is sent on
            # it), and nothing for Starlette to log as the app's failure.
            return _GONE
        finally:
            seen.ended()

    app = Starlette()
    # No Starlette route: every request, whatever its path or method, reaches the API's own
    # refusals (Starlette's are plain text, and the API would not count them).
    app.router.default = request_response(endpoint)
    return app
