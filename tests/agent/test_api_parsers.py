"""The api's parsers of what a client sends (agent.workloads.api.parse), fed arbitrary and
adversarial input: each returns a clean value or its documented refusal (RequestError with one
short line, None for no route, False for no declared length) and raises nothing else. A clean
body is what both data layers can store: its values are bound into SQLite here."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from urllib.parse import parse_qsl, quote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.workloads.api.parse import (
    DEFAULT_PAGE,
    MAX_DIGITS,
    MAX_PAGE,
    PREFIX,
    RequestError,
    Target,
    declared_over_limit,
    locate,
    page,
    parse_body,
)
from agent.workloads.api.schema import (
    BY_NAME,
    MAX_INT,
    MAX_STRING_CHARS,
    RESOURCES,
    SERVER_COLUMNS,
    Resource,
)

NAMES = [resource.name for resource in RESOURCES]
WAREHOUSES = BY_NAME["warehouses"]
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
DIGITS = st.text("0123456789\u0665\uff15\u00b2", max_size=20)  # ASCII, Arabic-Indic, fullwidth, ²
TOKENS = [
    *'{}[],:" \t\n\\',
    '"tenant"',
    '"capacity"',
    '"id"',
    "\\ud800",
    "\\udfff",
    "\\u0000",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-0",
    "1.5",
    "true",
    "null",
    "\ufeff",
    "9" * 5000,
    "-" + "9" * 5000,
    "[" * 3000,
]


def _one_line(message: str) -> None:
    assert message and "\n" not in message and "\r" not in message, repr(message)
    assert len(message) < 300, message


def _refused(call: Callable[[], object]) -> str:
    """The message of the RequestError `call()` raises, checked to be one short line."""
    with pytest.raises(RequestError) as refused:
        call()
    _one_line(str(refused.value))
    return str(refused.value)


# Bodies ------------------------------------------------------------------------------------------


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(SURROGATES | st.characters())
)
# One level of arrays and objects: deep ones come whole from _bodies, and cost no draws there.
JSON_VALUES: st.SearchStrategy[object] = (
    _SCALARS
    | st.lists(_SCALARS, max_size=2)
    | st.dictionaries(st.text(max_size=3), _SCALARS, max_size=2)
)


def _value_of(resource: Resource, name: str) -> st.SearchStrategy[object]:
    """Values for a field: mostly of its kind, at and past its bounds, or any JSON at all."""
    if name not in resource.field_names:
        return JSON_VALUES
    kind = resource.column(name).kind
    if kind == "bool":
        typed: st.SearchStrategy[object] = st.booleans()
    elif kind == "str":
        typed = st.text(st.characters() | SURROGATES, max_size=MAX_STRING_CHARS + 2)
    else:
        typed = st.integers(-2, 5) | st.integers(MAX_INT - 2, MAX_INT + 2) | st.integers()
    return typed | JSON_VALUES


def _objects(resource: Resource) -> st.SearchStrategy[bytes]:
    """JSON objects of some of the resource's fields, now and then with keys it refuses."""
    fields = st.fixed_dictionaries(
        {}, optional={name: _value_of(resource, name) for name in resource.field_names}
    )
    strangers = st.sampled_from([*SERVER_COLUMNS, "colour"]) | st.text(max_size=6)
    others = st.just({}) | st.dictionaries(strangers, JSON_VALUES, max_size=2)
    return st.builds(lambda f, o: json.dumps({**f, **o}).encode(), fields, others)


def _spliced(valid: bytes, at: int, junk: bytes) -> bytes:
    cut = at % (len(valid) + 1)
    return valid[:cut] + junk + valid[cut + len(junk) :]


def _bodies(resource: Resource) -> st.SearchStrategy[bytes]:
    soup = st.lists(st.sampled_from(TOKENS), max_size=30).map("".join)
    deep = st.integers(1, 3000).flatmap(
        lambda n: st.sampled_from(["[" * n + "]" * n, '{"a":' * n + "1" + "}" * n])
    )
    texts = st.one_of(soup, deep, st.text(SURROGATES | st.characters()))
    return st.one_of(
        _objects(resource),
        texts.map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.binary(max_size=64),
        st.builds(_spliced, _objects(resource), st.integers(0), st.binary(min_size=1, max_size=3)),
    )


_SQLITE = sqlite3.connect(":memory:")


def _storable(value: object) -> None:
    """SQLite, both layers' driver, takes the value as a bound parameter."""
    assert _SQLITE.execute("SELECT ?", (value,)).fetchone() == (value,)


def _check_fields(resource: Resource, fields: dict[str, object], partial: bool) -> None:
    assert fields if partial else set(fields) == set(resource.field_names)
    for name, value in fields.items():
        kind = resource.column(name).kind
        if kind == "bool":
            assert isinstance(value, bool)
        elif kind == "str":
            assert isinstance(value, str) and len(value) <= MAX_STRING_CHARS
        else:
            assert type(value) is int and (1 if kind == "ref" else 0) <= value <= MAX_INT
        _storable(value)


@given(
    st.sampled_from(RESOURCES).flatmap(lambda r: st.tuples(st.just(r), _bodies(r))),
    st.booleans(),
)
@example((WAREHOUSES, b"[" * 100_000), False)
@example((WAREHOUSES, b'{"capacity": ' + b"1" * 5000 + b"}"), True)
@example((WAREHOUSES, b'{"city": "\\ud800"}'), True)
def test_a_body_is_checked_fields_or_refused(case: tuple[Resource, bytes], partial: bool) -> None:
    resource, body = case
    try:
        fields = parse_body(resource, body, partial=partial)
    except RequestError as exc:
        _one_line(str(exc))
        return
    _check_fields(resource, dict(fields), partial)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 5000 + b"]" * 5000, "malformed JSON: nested too deeply"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, "malformed JSON: nested too deeply"),
        (b'{"capacity": ' + b"9" * 5000 + b"}", "an integer of 5000 digits: no field takes"),
        (b'{"capacity": -' + b"9" * 4301 + b"}", "an integer of 4301 digits"),
        (b'{"capacity": 99999999999999999}', "an integer of 17 digits"),
        (b'{"capacity": 9007199254740993}', "capacity: 9007199254740993 is outside 0.."),
        (b'{"city": "\\ud800"}', "city: not Unicode text"),
        (b'{"city": "\\udfff\\ud800"}', "city: not Unicode text"),
        (b'{"city": "\xed\xa0\x80"}', "the body is not UTF-8"),
        (b'{"capacity": NaN}', "malformed JSON: NaN is not a JSON value"),
        (b'{"capacity": -Infinity}', "malformed JSON: -Infinity is not a JSON value"),
        (b'{"capacity": 1e400}', "capacity: expected an integer, got Infinity"),
        (b'{"city": "a", "city": "b"}', '"city" is given more than once'),
        (b'{"city": [' + b"[" * 500 + b"]" * 500 + b"]}", "city: expected a string, got an array"),
        (b'{"city": "' + b"x" * 5000 + b'"}', "city: longer than 200 characters"),
        (b'{"code": 1' + b"0" * 300 + b"}", "an integer of 301 digits"),
        (b'{"' + b"k" * 10_000 + b'": 1}', '"' + "k" * 39 + "... is not a field of warehouses"),
        (b'{"city": "a\x01"}', "malformed JSON: Invalid control character at line 1 column 12"),
        (b"\xef\xbb\xbf{}", "malformed JSON: Unexpected UTF-8 BOM"),
        (b'"city"', "expected a JSON object of warehouses fields"),
    ],
)
def test_each_kind_of_bad_body_is_refused_saying_why(body: bytes, message: str) -> None:
    assert message in _refused(lambda: parse_body(WAREHOUSES, body, partial=True))


# Paths -------------------------------------------------------------------------------------------

_SEGMENTS = st.one_of(
    st.text(max_size=8),
    DIGITS,
    st.integers(-5, 2**70).map(str),
    st.just("9" * 5000),
    st.text(max_size=8).map(quote),
)
_PATHS = st.one_of(
    st.text(),
    st.builds(
        "{}{}{}{}".format,
        st.sampled_from([PREFIX, "/api", "/", "", "api/", "/API/", "//api/"]),
        st.sampled_from(NAMES) | st.text(max_size=8),
        st.just("") | _SEGMENTS.map("/{}".format),
        st.just("") | st.text().map("?{}".format),
    ),
)


@given(_PATHS)
@example("/api/customers/9223372036854775808")
@example("/api/customers/" + "9" * 5000)
@example("/api/customers/\uff11")
def test_a_path_is_a_target_it_spells_or_no_route(path: str) -> None:
    target = locate(path)
    if target is None:
        return
    assert isinstance(target, Target) and target.resource in RESOURCES
    route, _, query = path.partition("?")
    assert target.query == query
    collection = f"{PREFIX}{target.resource.name}"
    if target.item_id is None:
        assert route in (collection, f"{collection}/")
        return
    item = route.removeprefix(f"{collection}/")
    assert item.isascii() and item.isdigit() and len(item) <= MAX_DIGITS
    assert int(item) == target.item_id < 2**63  # within SQLite's integers


@pytest.mark.parametrize(
    "path",
    [
        "/api/customers/9223372036854775808",  # 2^63
        "/api/customers/" + "9" * 5000,
        "/api/customers/\u0661",  # an Arabic-Indic one, which int() would read
        "/api/customers/-1",
        "/api/customers/1/",
        "/api/customers/%31",
        "/api//1",
        "/api",
        "*",
    ],
)
def test_an_id_that_is_not_a_short_ascii_number_has_no_route(path: str) -> None:
    assert locate(path) is None


# Queries -----------------------------------------------------------------------------------------

_VALUES = st.one_of(
    st.text(max_size=10),
    DIGITS,
    st.integers(-(10**20), 10**20).map(str),
    st.just("9" * 5000),
    st.text(max_size=6).map(quote),
    st.sampled_from(["%zz", "%", "%F", "%FF", "+5", "%2B5", "%00", "5%00", ""]),
)
_QUERIES = st.one_of(
    st.text(),
    st.lists(
        st.tuples(
            st.sampled_from(["limit", "offset", "x", "li%6Dit", ""]) | st.text(max_size=4), _VALUES
        ),
        max_size=5,
    ).map(lambda pairs: "&".join(f"{name}={value}" for name, value in pairs)),
)


@given(_QUERIES)
@example("limit=" + "9" * 5000)
@example("limit=5&limit=5")
def test_a_query_is_a_page_in_range_or_refused(query: str) -> None:
    try:
        limit, offset = page(query)
    except RequestError as exc:
        _one_line(str(exc))
        return
    assert 1 <= limit <= MAX_PAGE and 0 <= offset <= MAX_INT
    given_ = dict(parse_qsl(query, keep_blank_values=True))
    assert limit == int(given_.get("limit", DEFAULT_PAGE))
    assert offset == int(given_.get("offset", 0))


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("limit=1&limit=2", "limit: given more than once"),
        ("offset=0&offset=0", "offset: given more than once"),
        ("limit=" + "9" * 5000, 'limit: expected a whole number, got "9999'),
        ("limit=%EF%BC%95", "limit: expected a whole number"),  # a fullwidth 5
        ("limit=%FF", "limit: expected a whole number"),
        ("limit=%zz", 'limit: expected a whole number, got "%zz"'),
        ("limit=-1", "limit: expected a whole number"),
        ("limit=0", "limit: 0 is outside 1..1000"),
        ("offset=9007199254740993", "offset: 9007199254740993 is outside 0..9007199254740992"),
    ],
)
def test_each_kind_of_bad_query_is_refused_saying_why(query: str, message: str) -> None:
    assert message in _refused(lambda: page(query))


# Declared lengths --------------------------------------------------------------------------------


@given(
    st.none()
    | st.binary(max_size=30)
    | st.from_regex(rb"\A[0-9]{1,40}\Z")
    | st.integers(0, 2**80).map(lambda n: str(n).encode()),
    st.integers(1, 2**24),
)
@example(b"9" * 5000, 1)
@example(b"0" * 5000 + b"1", 1)
def test_a_declared_length_is_over_the_limit_only_when_it_says_so(
    value: bytes | None, limit: int
) -> None:
    over = declared_over_limit(value, limit)
    if value is None or not value.isdigit():
        assert over is False
    elif len(value) <= 4000:
        assert over is (int(value) > limit)
    else:  # past int()'s limit the oracle reads the significant digits itself
        significant = value.lstrip(b"0") or b"0"
        assert over is (len(significant) > 4000 or int(significant) > limit)
