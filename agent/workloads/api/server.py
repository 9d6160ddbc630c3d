"""The api workload on the agent's own HTTP/2 server: `--root` is the database file (built by
`h2iot-agent api-db`), `data_layer` picks plain SQL or the ORM. Requests without a body answer
on the handler's plain `Reply` path, the hot one (the 7 list endpoints); a POST or PUT is
`Streamed` (agent/server/exchange.py) so its body can be read, under `body_limit_bytes`: over it
the connection answers 413 before the body is read whole and refuses the rest."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.errors import ExchangeClosed, UsageError
from agent.server.exchange import BodyTooLarge, ServerExchange
from agent.server.handler import SERVER_HEADER, Handler, Reply, Streamed
from agent.server.request import Request
from agent.workloads.api.layers import open_layer
from agent.workloads.api.rest import JSON_CONTENT_TYPE, WITH_BODY, Answer, Api, Target, locate
from agent.workloads.api.spec import API
from agent.workloads.api.store import DataLayerKind

_JSON = (b"content-type", JSON_CONTENT_TYPE)


def _headers(answer: Answer) -> tuple[tuple[bytes, bytes], ...]:
    headers: tuple[tuple[bytes, bytes], ...] = (SERVER_HEADER,)
    if answer.body:
        headers = (_JSON, SERVER_HEADER)
    if answer.allow:
        headers += ((b"allow", b", ".join(answer.allow)),)
    return headers


def reply(answer: Answer) -> Reply:
    return Reply(answer.status, _headers(answer), memoryview(answer.body))


class ApiHandler:
    def __init__(self, api: Api) -> None:
        self.api = api

    def handle(self, request: Request) -> Reply | Streamed:
        target = locate(request.path)
        method = request.method
        if target is not None and method in WITH_BODY and method in target.methods:
            limit = self.api.body_limit_bytes

            async def run(exchange: ServerExchange) -> None:
                await self._with_body(method, target, exchange)

            return Streamed(run, body_limit_bytes=limit)
        return reply(self.api.answer(method, target))

    async def _with_body(self, method: bytes, target: Target, exchange: ServerExchange) -> None:
        try:
            body = await exchange.read_body(self.api.body_limit_bytes)
        except BodyTooLarge:
            self.api.statuses[413] += 1  # the connection answered it
            return
        except ExchangeClosed:
            return  # the peer reset the stream: nobody to answer
        answer = self.api.answer(method, target, body)
        headers = (*_headers(answer), (b"content-length", str(len(answer.body)).encode()))
        if not answer.body:
            exchange.send_headers(answer.status, headers, end_stream=True)
            return
        exchange.send_headers(answer.status, headers)
        exchange.send(answer.body, end_stream=True)


def open_api(root: Path | None, params: Mapping[str, object]) -> Api:
    """The API over the database `--root` names, with the server params; both stacks start here."""
    if root is None:
        raise UsageError("--root FILE (the api database, `h2iot-agent api-db FILE`) is required")
    values = {**API.defaults(), **params}
    kind: DataLayerKind = "orm" if values["data_layer"] == "orm" else "sql"
    limit = values["body_limit_bytes"]
    assert isinstance(limit, int), "checked where it was parsed"
    return Api(open_layer(kind, root), limit)


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    return ApiHandler(open_api(root, params))
