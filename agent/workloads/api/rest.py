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
What a client sends is parsed by agent.workloads.api.parse: an id is at most 16 ASCII digits,
anything else no route (404), never text that reaches the database.

`Api.statuses` counts every answer by status, refusals of a body before it was read whole
included; each refusal carries that tally in `h2iot-api-tally` (`200=41,404=2`, by status), so
a client can tell what a server counted. A success carries none: the list pages are the hot
path, and a header whose value changes on every answer would cost HPACK on each.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agent.workloads.api.parse import SHOWN_CHARS, RequestError, Target, page, parse_body
from agent.workloads.api.store import DataLayer, StoreError

DEFAULT_BODY_LIMIT_BYTES = 64 * 1024
JSON_CONTENT_TYPE = b"application/json"
TALLY_HEADER = b"h2iot-api-tally"
_NO_ROUTE = "no such resource (see /api/<resource>)"

Header = tuple[bytes, bytes]


def _dumps(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""  # JSON, or empty (204)
    headers: tuple[Header, ...] = ()  # the API's own (allow, the tally), after the stack's

    @classmethod
    def error(cls, status: int, message: str, headers: tuple[Header, ...] = ()) -> Answer:
        return cls(status, _dumps({"error": message}), headers)

    @property
    def refusal(self) -> bool:
        return not 200 <= self.status < 300


def too_large(limit_bytes: int) -> Answer:
    return Answer.error(413, f"the body is over the limit of {limit_bytes} bytes")


async def read_within(chunks: AsyncIterator[bytes], limit_bytes: int) -> bytes | None:
    """A body from its chunks as they arrive, or None as soon as it is over `limit_bytes`: what
    is left of `chunks` is never read here (each stack decides what becomes of it)."""
    parts, total = [], 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit_bytes:
            return None
        parts.append(chunk)
    return b"".join(parts)


async def drop(chunks: AsyncIterator[bytes], limit_bytes: float = math.inf) -> None:
    """Read what is left of a body and drop it, to its end or until over `limit_bytes`."""
    dropped = 0
    async for chunk in chunks:
        dropped += len(chunk)
        if dropped > limit_bytes:
            return


def tally(statuses: Counter[int]) -> bytes:
    """The `h2iot-api-tally` value: answers by status, ascending (`200=41,404=2`)."""
    return b",".join(b"%d=%d" % item for item in sorted(statuses.items()))


class Api:
    """The REST semantics over one data layer; `statuses` counts every answer by status."""

    def __init__(self, layer: DataLayer, body_limit_bytes: int = DEFAULT_BODY_LIMIT_BYTES) -> None:
        self.layer = layer
        self.body_limit_bytes = body_limit_bytes
        self.statuses: Counter[int] = Counter()

    def answer(self, method: bytes, target: Target | None, body: bytes = b"") -> Answer:
        return self._counted(self._answer(method, target, body))

    def body_too_large(self) -> Answer:
        """The 413 of a body refused before it was read whole (by its declared length, or as
        its running total passed the limit), counted like every answer."""
        return self._counted(too_large(self.body_limit_bytes))

    def _counted(self, answer: Answer) -> Answer:
        self.statuses[answer.status] += 1
        if not answer.refusal:
            return answer
        counted = (TALLY_HEADER, tally(self.statuses))
        return Answer(answer.status, answer.body, (*answer.headers, counted))

    def _answer(self, method: bytes, target: Target | None, body: bytes) -> Answer:
        if target is None:
            return Answer.error(404, _NO_ROUTE)
        if method not in target.methods:
            allowed = ", ".join(m.decode() for m in target.methods)
            return Answer.error(
                405,
                f"{method[:SHOWN_CHARS].decode(errors='replace')}: use {allowed}",
                ((b"allow", b", ".join(target.methods)),),
            )
        if len(body) > self.body_limit_bytes:
            return too_large(self.body_limit_bytes)
        try:
            return self._dispatch(method, target, body)
        except RequestError as exc:
            return Answer.error(400, str(exc))
        except StoreError as exc:
            return Answer.error(exc.status, f"{target.resource.name}: {exc}")

    def _dispatch(self, method: bytes, target: Target, body: bytes) -> Answer:
        layer, resource, item_id = self.layer, target.resource, target.item_id
        if item_id is None:
            if method == b"GET":
                limit, offset = page(target.query)
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
