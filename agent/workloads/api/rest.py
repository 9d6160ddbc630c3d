"""The api workload's REST semantics, apart from any HTTP stack: a request's method, path and
body in, a status and JSON body out. Both server stacks answer through this one function (the
agent's own server through its handler, hypercorn through a Starlette app), so they differ only
in the HTTP/2 and server machinery the comparison is about.

    GET    /api/<resource>?limit=L&offset=O   200 {"items": [...], "limit": L, "offset": O}
    GET    /api/<resource>/<id>               200 the row | 404
    POST   /api/<resource>                    201 the new row (every field given)
    PUT    /api/<resource>/<id>               200 the row after the change (any of its fields)
    DELETE /api/<resource>/<id>               204 | 404

Refusals carry {"error": "<one line>"}: 400 a malformed query or body (the message says what),
404 no such resource or row, 405 a method the path does not take, 409 a reference to a missing
row or a delete of a referenced one, 413 a body over the limit, 503 the database busy or locked.
An id is digits only: anything else is no route (404), never text that reaches the database.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from urllib.parse import parse_qsl

from agent.workloads.api.schema import BY_NAME, MAX_INT, BodyError, Resource, parse_body
from agent.workloads.api.store import DataLayer, StoreError

PREFIX = "/api/"
DEFAULT_PAGE = 50
MAX_PAGE = 1000
DEFAULT_BODY_LIMIT_BYTES = 64 * 1024
WITH_BODY = (b"POST", b"PUT")
COLLECTION_METHODS = (b"GET", b"POST")
ITEM_METHODS = (b"GET", b"PUT", b"DELETE")
JSON_CONTENT_TYPE = b"application/json"


def _dumps(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""  # JSON, or empty (204)
    allow: tuple[bytes, ...] = ()  # 405: the methods the path takes

    @classmethod
    def error(cls, status: int, message: str, allow: tuple[bytes, ...] = ()) -> Answer:
        return cls(status, _dumps({"error": message}), allow)


def too_large(limit_bytes: int) -> Answer:
    return Answer.error(413, f"the body is over the limit of {limit_bytes} bytes")


@dataclass(frozen=True)
class Target:
    """Where a request goes: a resource, one of its rows (or the collection), the query."""

    resource: Resource
    item_id: int | None
    query: str

    @property
    def methods(self) -> tuple[bytes, ...]:
        return COLLECTION_METHODS if self.item_id is None else ITEM_METHODS


def locate(path: str) -> Target | None:
    """The target of `:path`, or None (404)."""
    path, _, query = path.partition("?")
    if not path.startswith(PREFIX):
        return None
    name, _, item = path[len(PREFIX) :].partition("/")
    resource = BY_NAME.get(name)
    if resource is None:
        return None
    if not item:
        return Target(resource, None, query)
    # ASCII digits only: str.isdigit() also takes other scripts' digits, which int() reads.
    if not item.isascii() or not item.isdigit() or len(item) > 16:
        return None
    return Target(resource, int(item), query)


def _page(query: str) -> tuple[int, int]:
    """(limit, offset) from a list's query string; BodyError naming the parameter."""
    limit, offset = DEFAULT_PAGE, 0
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in ("limit", "offset"):
            continue
        if not value.isascii() or not value.isdigit() or len(value) > 16:
            raise BodyError(f"{name}: expected a whole number, got {value!r}")
        number = int(value)
        if name == "limit":
            if not 1 <= number <= MAX_PAGE:
                raise BodyError(f"limit: {number} is outside 1..{MAX_PAGE}")
            limit = number
        else:
            if number > MAX_INT:
                raise BodyError(f"offset: {number} is outside 0..{MAX_INT}")
            offset = number
    return limit, offset


class Api:
    """The REST semantics over one data layer; `statuses` counts every answer by status."""

    def __init__(self, layer: DataLayer, body_limit_bytes: int = DEFAULT_BODY_LIMIT_BYTES) -> None:
        self.layer = layer
        self.body_limit_bytes = body_limit_bytes
        self.statuses: Counter[int] = Counter()

    def answer(self, method: bytes, target: Target | None, body: bytes = b"") -> Answer:
        answer = self._answer(method, target, body)
        self.statuses[answer.status] += 1
        return answer

    def _answer(self, method: bytes, target: Target | None, body: bytes) -> Answer:
        if target is None:
            return Answer.error(404, "no such resource (see /api/<resource>)")
        if method not in target.methods:
            allowed = ", ".join(m.decode() for m in target.methods)
            return Answer.error(
                405, f"{method.decode(errors='replace')}: use {allowed}", target.methods
            )
        if len(body) > self.body_limit_bytes:
            return too_large(self.body_limit_bytes)
        try:
            return self._dispatch(method, target, body)
        except BodyError as exc:
            return Answer.error(400, str(exc))
        except StoreError as exc:
            return Answer.error(exc.status, f"{target.resource.name}: {exc}")

    def _dispatch(self, method: bytes, target: Target, body: bytes) -> Answer:
        layer, resource, item_id = self.layer, target.resource, target.item_id
        if item_id is None:
            if method == b"GET":
                limit, offset = _page(target.query)
                items = layer.list(resource, limit, offset)
                return Answer(200, _dumps({"items": items, "limit": limit, "offset": offset}))
            row = layer.create(resource, parse_body(resource, body, partial=False))
            return Answer(201, _dumps(row))
        if method == b"GET":
            found = layer.get(resource, item_id)
        elif method == b"PUT":
            found = layer.update(resource, item_id, parse_body(resource, body, partial=True))
        else:
            return Answer(204) if layer.delete(resource, item_id) else self._missing(target)
        return self._missing(target) if found is None else Answer(200, _dumps(found))

    @staticmethod
    def _missing(target: Target) -> Answer:
        return Answer.error(404, f"{target.resource.name}/{target.item_id}: no such row")
