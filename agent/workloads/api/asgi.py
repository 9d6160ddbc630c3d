"""The api workload as a Starlette app: the ecosystem's production stack (hypercorn serves it
over HTTP/2) answering the same REST semantics (agent.workloads.api.rest) over the same
database and data layer as the agent's own server. Starlette routes and reads the body; the
endpoints are `async def`, so they run on the event loop as the agent's handler does (a
threadpool hop per request would cost more than the query it frees the loop from).

`Activity` sees every request and response of the app: the hypercorn engine's trial records
take their request counts and serve window from it."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent.probe import ProbeSample, sample
from agent.workloads.api.rest import Answer, Api, Target, too_large
from agent.workloads.api.schema import BY_NAME

_NO_ROUTE = Answer.error(404, "no such resource (see /api/<resource>)")


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


async def read_limited(request: Request, limit_bytes: int) -> bytes | None:
    """The body, or None as soon as it is known to be over `limit_bytes` (declared or counted):
    the rest is never read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
        return None
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _response(answer: Answer) -> Response:
    headers = {"allow": ", ".join(m.decode() for m in answer.allow)} if answer.allow else None
    if answer.status == 204:
        return Response(status_code=204, headers=headers)
    return Response(answer.body, answer.status, headers, media_type="application/json")


def starlette_app(api: Api, activity: Activity | None = None) -> Starlette:
    seen = activity or Activity()

    async def endpoint(request: Request) -> Response:
        seen.began()
        try:
            return _response(await _answer(request))
        finally:
            seen.ended()

    async def _answer(request: Request) -> Answer:
        resource = BY_NAME.get(request.path_params["resource"])
        if resource is None:
            return _NO_ROUTE
        item_id = request.path_params.get("item_id")
        target = Target(resource, item_id, request.url.query)
        method = request.method.encode()
        body = b""
        if method in (b"POST", b"PUT") and method in target.methods:
            limited = await read_limited(request, api.body_limit_bytes)
            if limited is None:
                api.statuses[413] += 1
                return too_large(api.body_limit_bytes)
            body = limited
        return api.answer(method, target, body)

    methods = ["GET", "POST", "PUT", "DELETE"]
    return Starlette(
        routes=[
            Route("/api/{resource}", endpoint, methods=methods),
            Route("/api/{resource}/{item_id:int}", endpoint, methods=methods),
        ]
    )
