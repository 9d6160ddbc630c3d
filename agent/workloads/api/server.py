"""The api workload on the agent's own HTTP/2 server: `--root` is the database file (built by
`h2iot-agent api-db`), `data_layer` picks plain SQL or the ORM. Requests without a body answer
on the handler's plain `Reply` path, the hot one (the 7 list endpoints)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.errors import UsageError
from agent.server.handler import SERVER_HEADER, Handler, Reply, Request
from agent.workloads.api.rest import JSON_CONTENT_TYPE, Answer, Api, locate
from agent.workloads.api.spec import API
from agent.workloads.api.store import DataLayerKind, open_layer

_JSON = (b"content-type", JSON_CONTENT_TYPE)


def reply(answer: Answer) -> Reply:
    headers: tuple[tuple[bytes, bytes], ...] = (SERVER_HEADER,)
    if answer.body:
        headers = (_JSON, SERVER_HEADER)
    if answer.allow:
        headers += ((b"allow", b", ".join(answer.allow)),)
    return Reply(answer.status, headers, memoryview(answer.body))


class ApiHandler:
    def __init__(self, api: Api) -> None:
        self.api = api

    def handle(self, request: Request) -> Reply:
        return reply(self.api.answer(request.method, locate(request.path)))


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
