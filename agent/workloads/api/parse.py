"""What a client sends the api, parsed: the target of a `:path` (`locate`), a list's query
(`page`), a body's declared length (`declared_over_limit`) and a body (`parse_body`). Pure, and
the one parser of each for both server stacks, so the two refuse the same requests alike.

Whatever the bytes, each returns a value or its documented refusal and raises nothing else:
`locate` None (404), `declared_over_limit` False (a value that is not a length declares
nothing), `page` and `parse_body` RequestError (400, one line naming the parameter or field).
What the standard library's parsers raise besides their own errors on a client's input is the
client's mistake too, and stopped here: json's RecursionError on deep nesting, int()'s
ValueError past 4300 digits, and a lone surrogate escape that json accepts and SQLite cannot
encode. A value that passes is safe for both data layers: ints within MAX_INT, strings of
valid Unicode within MAX_STRING_CHARS, booleans.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import parse_qsl

from agent.errors import AgentError
from agent.workloads.api.schema import (
    BY_NAME,
    MAX_INT,
    MAX_STRING_CHARS,
    SERVER_COLUMNS,
    JsonValue,
    Resource,
)

PREFIX = "/api/"
DEFAULT_PAGE = 50
MAX_PAGE = 1000
WITH_BODY = (b"POST", b"PUT")
COLLECTION_METHODS = (b"GET", b"POST")
ITEM_METHODS = (b"GET", b"PUT", b"DELETE")
# A number in a path or query has at most MAX_INT's digits: every id and offset fits SQLite's
# 64-bit integers, and int() never meets a string long enough to refuse.
MAX_DIGITS = len(str(MAX_INT))
SHOWN_CHARS = 40  # of a client's text quoted in a refusal, which stays one short line


class RequestError(AgentError):
    """A request the API refuses as malformed: 400, the client's mistake. The message, one
    line, says what is wrong, naming the parameter or field."""


@dataclass(frozen=True)
class Target:
    """Where a request goes: a resource, one of its rows (or the collection), the query."""

    resource: Resource
    item_id: int | None
    query: str

    @property
    def methods(self) -> tuple[bytes, ...]:
        return COLLECTION_METHODS if self.item_id is None else ITEM_METHODS

    def takes_body(self, method: bytes) -> bool:
        return method in WITH_BODY and method in self.methods


def shown(value: object) -> str:
    """A client's value as a refusal quotes it: JSON, cut to SHOWN_CHARS; an array or object by
    its kind alone (it may be long, or too deep to print)."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    text = json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}..."


def _whole_number(text: str) -> int | None:
    # str.isdigit() also takes other scripts' digits, which int() reads: ASCII only.
    if not text.isascii() or not text.isdigit() or len(text) > MAX_DIGITS:
        return None
    return int(text)


def locate(path: str) -> Target | None:
    """The target of `:path` as sent (query included), or None: no route (404). An id is
    ASCII digits, at most MAX_DIGITS of them; anything else never reaches the database."""
    path, _, query = path.partition("?")
    if not path.startswith(PREFIX):
        return None
    name, _, item = path[len(PREFIX) :].partition("/")
    resource = BY_NAME.get(name)
    if resource is None:
        return None
    if not item:
        return Target(resource, None, query)
    item_id = _whole_number(item)
    return None if item_id is None else Target(resource, item_id, query)


_PAGE_PARAMETERS = ("limit", "offset")


def page(query: str) -> tuple[int, int]:
    """(limit, offset) from a list's query string; RequestError naming the parameter. Other
    parameters (a cache buster) are not the API's and pass; one of its own given twice is
    refused rather than guessed at."""
    given: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in _PAGE_PARAMETERS:
            continue
        if name in given:
            raise RequestError(f"{name}: given more than once")
        given[name] = value
    limit = _parameter(given, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    return limit, _parameter(given, "offset", 0, 0, MAX_INT)


def _parameter(given: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    text = given.get(name)
    if text is None:
        return default
    number = _whole_number(text)
    if number is None:
        raise RequestError(f"{name}: expected a whole number, got {shown(text)}")
    if not low <= number <= high:
        raise RequestError(f"{name}: {number} is outside {low}..{high}")
    return number


def declared_over_limit(content_length: bytes | None, limit_bytes: int) -> bool:
    """Whether a request's content-length declares a body over `limit_bytes`. Only ASCII
    digits declare a length (h2 refuses any other value as a malformed request first)."""
    if content_length is None or not content_length.isdigit():
        return False
    digits = content_length.lstrip(b"0")
    return len(digits) > MAX_DIGITS or int(digits or b"0") > limit_bytes


# The body ---------------------------------------------------------------------------------------


def _integer(literal: str) -> int:
    # No field takes more than MAX_INT's digits, and int() raises ValueError past 4300.
    if len(literal.lstrip("-")) > MAX_DIGITS:
        digits = len(literal.lstrip("-"))
        raise RequestError(f"an integer of {digits} digits: no field takes one over {MAX_INT}")
    return int(literal)


def _not_json(constant: str) -> NoReturn:
    raise RequestError(f"malformed JSON: {constant} is not a JSON value")


def _object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    document: dict[str, object] = {}
    for name, value in pairs:
        if name in document:
            raise RequestError(f"{shown(name)} is given more than once")
        document[name] = value
    return document


def _document(resource: Resource, body: bytes) -> dict[str, object]:
    try:
        # Decoded here: json.loads would guess UTF-16 or UTF-32 from the first bytes.
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError("the body is not UTF-8") from None
    try:
        document = json.loads(
            text, parse_int=_integer, parse_constant=_not_json, object_pairs_hook=_object
        )
    except json.JSONDecodeError as exc:
        # Some of json's messages end in "at" already ("Invalid control character at").
        reason = exc.msg.removesuffix(" at")
        raise RequestError(
            f"malformed JSON: {reason} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        # json recurses once per level: brackets well under the body limit go deeper than the
        # interpreter's stack. Unwound by now, so the server is unharmed.
        raise RequestError("malformed JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise RequestError(f"expected a JSON object of {resource.name} fields")
    return document


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise RequestError(f"{name}: expected a string, got {shown(value)}")
    if len(value) > MAX_STRING_CHARS:
        raise RequestError(f"{name}: longer than {MAX_STRING_CHARS} characters")
    try:
        # A \ud800 escape is a str json accepts and no UTF-8 database can store.
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(f"{name}: not Unicode text (a lone surrogate escape)") from None
    return value


def _checked(resource: Resource, name: str, value: object) -> JsonValue:
    try:
        column = resource.column(name)
    except KeyError:
        writable = ", ".join(resource.field_names)
        raise RequestError(
            f"{shown(name)} is not a field of {resource.name} (its fields: {writable})"
        ) from None
    if column.kind == "bool":
        if not isinstance(value, bool):
            raise RequestError(f"{name}: expected true or false, got {shown(value)}")
        return value
    if column.kind == "str":
        return _text(name, value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name}: expected an integer, got {shown(value)}")
    low = 1 if column.kind == "ref" else 0
    if not low <= value <= MAX_INT:
        raise RequestError(f"{name}: {value} is outside {low}..{MAX_INT}")
    return value


def parse_body(resource: Resource, body: bytes, *, partial: bool) -> dict[str, JsonValue]:
    """A create (every field) or update (`partial`: at least one) body as checked fields;
    RequestError naming what is wrong otherwise. Server columns (id, version, timestamps) are
    not the client's to write."""
    fields = {}
    for name, value in _document(resource, body).items():
        if name in SERVER_COLUMNS:
            raise RequestError(f"{shown(name)} is set by the server, not the client")
        fields[name] = _checked(resource, name, value)
    if partial:
        if not fields:
            raise RequestError(
                f"no field to update (the fields of {resource.name}: "
                f"{', '.join(resource.field_names)})"
            )
    else:
        missing = [name for name in resource.field_names if name not in fields]
        if missing:
            raise RequestError(f"missing field(s): {', '.join(missing)}")
    return fields
