"""The api workload on the agent's own HTTP/2 server: `--root` is the database file (built by
`h2iot-agent api-db`), `data_layer` picks plain SQL or the ORM. Requests without a body answer
on the handler's plain `Reply` path, the hot one (the 7 list endpoints); a POST or PUT is
`Streamed` (agent/server/exchange.py) so its body can be read, up to `body_limit_bytes`. A body
declared or found over it gets the API's own 413 at once; what more of it comes is dropped up
to DRAINED_BYTES, and past that the connection stops the upload with RST_STREAM(NO_ERROR) as
the handler returns. The connection's own limit (`Streamed.body_limit_bytes`) is not used: its
413 has no body, and the API would not count it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from agent.errors import ExchangeClosed, UsageError
from agent.server.exchange import ServerExchange
from agent.server.handler import SERVER_HEADER, Handler, Reply, Streamed
from agent.server.request import Request
from agent.workloads.api.layers import open_layer
from agent.workloads.api.parse import Target, declared_over_limit, locate
from agent.workloads.api.rest import JSON_CONTENT_TYPE, Answer, Api, drop, read_within
from agent.workloads.api.spec import API
from agent.workloads.api.store import DataLayerKind

_JSON = (b"content-type", JSON_CONTENT_TYPE)
# After a 413, what more of the body comes is dropped up to a default stream window: a body that
# ends within it ends its stream cleanly (some clients take a reset after a complete response
# for a failure), a longer one is reset as the handler returns. The connection's own refusal
# lets a peer send as much, by withholding the stream's credit.
DRAINED_BYTES = 65_535


def _headers(answer: Answer) -> tuple[tuple[bytes, bytes], ...]:
    if answer.body:
        return (_JSON, SERVER_HEADER, *answer.headers)
    return (SERVER_HEADER, *answer.headers)


def reply(answer: Answer) -> Reply:
    return Reply(answer.status, _headers(answer), memoryview(answer.body))


async def _chunks(exchange: ServerExchange) -> AsyncIterator[bytes]:
    while (chunk := await exchange.receive()) is not None:
        yield chunk


def _send(exchange: ServerExchange, answer: Answer) -> None:
    headers = (*_headers(answer), (b"content-length", str(len(answer.body)).encode()))
    if not answer.body:
        exchange.send_headers(answer.status, headers, end_stream=True)
        return
    exchange.send_headers(answer.status, headers)
    exchange.send(answer.body, end_stream=True)


class ApiHandler:
    def __init__(self, api: Api) -> None:
        self.api = api

    def handle(self, request: Request) -> Reply | Streamed:
        target = locate(request.path)
        method = request.method
        if target is None or not target.takes_body(method):
            return reply(self.api.answer(method, target))
        declared = request.headers.get(b"content-length")

        async def run(exchange: ServerExchange) -> None:
            await self._with_body(method, target, declared, exchange)

        return Streamed(run)

    async def _with_body(
        self, method: bytes, target: Target, declared: bytes | None, exchange: ServerExchange
    ) -> None:
        api, chunks = self.api, _chunks(exchange)
        try:
            if not declared_over_limit(declared, api.body_limit_bytes):
                body = await read_within(chunks, api.body_limit_bytes)
                if body is not None:
                    _send(exchange, api.answer(method, target, body))
                    return
            _send(exchange, api.body_too_large())
            await drop(chunks, DRAINED_BYTES)
        except ExchangeClosed:
            return  # the peer reset the stream: nobody to answer, or nothing left to read


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
