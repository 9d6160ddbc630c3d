"""Every parser of a peer's bytes in the payload workload, fed arbitrary and adversarial input:
random bytes, valid messages cut short or changed (a bit flipped, a length field set huge, bytes
cut, inserted or repeated), deep nesting, numbers of thousands of digits, strings no codec can
carry, codec names no parser should trust. Each answers a clean decode or its documented
refusal, never another exception: a body's decoder DecodeError (the server's 400), the request's
header fields a Reply (counted), the server's figures PeerProtocolError.

A clean decode is a dataset the server can digest: its packed form is written and read back."""

from __future__ import annotations

import encodings.aliases
import re
import struct
from array import array
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import PeerProtocolError
from agent.server.handler import Reply, Streamed
from agent.server.request import Request
from agent.workloads.payload.codecs import ENCODINGS, dime, envelope, swa
from agent.workloads.payload.codecs.tree import from_tree
from agent.workloads.payload.dataset import Dataset, Matrix, Record, Structs, pack, unpack
from agent.workloads.payload.errors import DecodeError
from agent.workloads.payload.protocol import (
    DECODE_CPU_HEADER,
    DIGEST_HEADER,
    PATH,
    RSS_ADDED_HEADER,
    RSS_PEAK_HEADER,
    SOAP_ACTION_HEADER,
    DecodeFigures,
)
from agent.workloads.payload.server import PayloadHandler
from tests.agent.payload_strategies import damaged, datasets

FUZZ = settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
# Codecs whose decoding fails in odd ways (a UnicodeError that refuses the "replace" handler,
# bytes-to-bytes codecs, one that always fails, none), often, and any codec Python knows.
CODEC_NAMES = st.one_of(
    st.sampled_from(
        ("idna", "punycode", "undefined", "unicode_escape", "utf_7", "rot13", "base64", "x", "")
    ),
    st.sampled_from(sorted(set(encodings.aliases.aliases.values()))),
)
# Shallow and deep: a recursive parser fails a few hundred levels down.
DEPTHS = st.one_of(st.integers(1, 8), st.integers(200, 5000))


def decodes_or_refuses(name: str, content_type: str, body: bytes) -> None:
    try:
        dataset = ENCODINGS[name].decode(content_type, body)
    except DecodeError:
        return
    clean(dataset)


def clean(dataset: Dataset) -> None:
    packed = pack(dataset)
    assert pack(unpack(packed, "a clean decode")) == packed


def messages(encode: Callable[[Dataset], bytes]) -> st.SearchStrategy[bytes]:
    """Random bytes, or one of `encode`'s messages, valid or damaged."""
    encoded = datasets().map(encode)
    return st.one_of(st.binary(max_size=300), encoded, encoded.flatmap(damaged))


def nested(body: bytes, opener: bytes) -> st.SearchStrategy[bytes]:
    """`opener` repeated (DEPTHS), put into `body` anywhere."""
    return st.tuples(st.integers(0, len(body)), DEPTHS).map(
        lambda cut_count: body[: cut_count[0]] + opener * cut_count[1] + body[cut_count[0] :]
    )


def encoded(name: str) -> Callable[[Dataset], bytes]:
    return lambda dataset: ENCODINGS[name].encode(dataset)[1]


# raw -----------------------------------------------------------------------------------------


@given(body=messages(encoded("raw")))
@FUZZ
def test_the_packed_form_decodes_or_is_refused(body: bytes) -> None:
    decodes_or_refuses("raw", "application/octet-stream", body)


# soap: the envelope (also the root of swa and dime) -------------------------------------------


def soap_extremes() -> st.SearchStrategy[bytes]:
    """Elements opened and never closed; an XML declaration naming any codec; items, numbers
    and an arrayType of thousands of digits."""
    matrix = envelope.write_inline(Matrix(1, array("d", [0.5])))
    records = envelope.write_inline(Structs((Record("a", 7, True),)))
    digits = st.integers(1, 6000).map(lambda n: b"9" * n)
    declared = CODEC_NAMES.map(
        lambda codec: records.replace(b'encoding="UTF-8"', b'encoding="%s"' % codec.encode())
    )
    return st.one_of(
        nested(records, b"<a>"),
        nested(b"", b"<soapenv:Envelope>"),
        declared,
        digits.map(lambda n: re.sub(rb"<item>[^<]*", b"<item>" + n, matrix)),
        digits.map(lambda n: re.sub(rb"<number>[^<]*", b"<number>" + n, records)),
        digits.map(lambda n: matrix.replace(b"[1,1]", b"[%s,%s]" % (n, n))),
    )


# A declaration naming unicode_escape has pyexpat decode with it, and Python warns of the
# escapes it meets: a warning, not an error (the envelope is then read, or refused, as declared).
@pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")
@given(body=st.one_of(messages(encoded("soap")), soap_extremes()))
@FUZZ
def test_an_envelope_decodes_or_is_refused(body: bytes) -> None:
    decodes_or_refuses("soap", "text/xml", body)


# swa: multipart/related ------------------------------------------------------------------------

BOUNDARY = "=_fuzz"


def swa_message(dataset: Dataset) -> bytes:
    """The message with a fixed boundary, so that an example replays the same bytes."""
    content_type, body = swa.encode(dataset)
    boundary = content_type.rsplit('boundary="', 1)[1].rstrip('"')
    return body.replace(boundary.encode(), BOUNDARY.encode())


SWA_TYPE = f'multipart/related; type="text/xml"; start="<envelope@h2iot>"; boundary="{BOUNDARY}"'


def nested_parts(depth: int, media_type: bytes) -> bytes:
    """Parts inside parts: multipart ones each with a boundary of their own, or message/*."""
    if media_type.startswith(b"message/"):
        head = b"--%s\r\nContent-Type: %s\r\n\r\n" % (BOUNDARY.encode(), media_type)
        return head + b"Content-Type: %s\r\n\r\n" % media_type * depth
    levels = [
        b'--%s\r\nContent-Type: %s; boundary="b%d"\r\n\r\n'
        % (BOUNDARY.encode() if level == 0 else b"b%d" % level, media_type, level + 1)
        for level in range(depth)
    ]
    return b"".join(levels) + b"\n" * 100


def swa_content_types() -> st.SearchStrategy[str]:
    """The Content-Type changed: text appended (any character), a parameter in RFC 2231's
    encoded form in any charset."""
    rfc2231 = st.tuples(
        st.sampled_from(("boundary", "start", "type")),
        CODEC_NAMES,
        st.binary(max_size=8),
    ).map(
        lambda param: f"; {param[0]}*={param[1]}''" + "".join(f"%{byte:02X}" for byte in param[2])
    )
    return st.one_of(
        st.just(SWA_TYPE),
        st.text(max_size=40).map(lambda text: SWA_TYPE + text),
        rfc2231.map(lambda param: SWA_TYPE.split("; boundary", maxsplit=1)[0] + param),
        rfc2231.map(lambda param: SWA_TYPE + param),
    )


@given(
    content_type=swa_content_types(),
    body=st.one_of(
        messages(swa_message),
        st.builds(
            nested_parts,
            DEPTHS,
            st.sampled_from((b"multipart/mixed", b"multipart/related", b"message/rfc822")),
        ),
    ),
)
@FUZZ
def test_a_multipart_message_decodes_or_is_refused(content_type: str, body: bytes) -> None:
    decodes_or_refuses("swa", content_type, body)


# dime ----------------------------------------------------------------------------------------


def dime_extremes() -> st.SearchStrategy[bytes]:
    """Record headers alone with any flags and lengths, and messages of many records."""
    headers = st.lists(
        st.tuples(
            st.integers(0, 255),
            st.integers(0, 255),
            st.sampled_from((0, 1, 4, 0xFFFF)),
            st.sampled_from((0, 1, 4, 0xFFFF)),
            st.sampled_from((0, 1, 4, 0xFFFF)),
            st.sampled_from((0, 1, 8, 0xFFFFFFFF, 0x7FFFFFFF)),
        ).map(lambda fields: struct.pack(">BBHHHI", *fields) + bytes(8)),
        min_size=1,
        max_size=20,
    ).map(b"".join)
    empty = struct.pack(">BBHHHI", 0x08, 0x40, 0, 0, 0, 0)  # TYPE_T none, neither MB nor ME
    many = st.tuples(datasets(), st.integers(0, 3000)).map(
        lambda made: _with_records(dime.encode(made[0])[1], empty, made[1])
    )
    return st.one_of(headers, many)


def _with_records(body: bytes, record: bytes, count: int) -> bytes:
    """`count` copies of `record` after the message's first record."""
    first = dime.read_records(body)[0]
    first_bytes = dime.HEADER_BYTES + sum(
        dime.padded(len(field)) for field in (first.options, first.id, first.type, first.data)
    )
    return body[:first_bytes] + record * count + body[first_bytes:]


@given(
    body=st.one_of(
        messages(encoded("dime")),
        st.tuples(datasets(), st.integers(1, 16))
        .map(lambda made: dime.encode(made[0], chunk_bytes=made[1])[1])
        .flatmap(damaged),
        dime_extremes(),
    )
)
@FUZZ
def test_a_dime_message_decodes_or_is_refused(body: bytes) -> None:
    decodes_or_refuses("dime", dime.CONTENT_TYPE, body)


# json and cbor, and the tree both decode to ---------------------------------------------------


def json_extremes() -> st.SearchStrategy[bytes]:
    record = b'{"records":[{"flag":true,"text":"%s","number":%s}]}'
    texts = st.sampled_from((b"\\ud800", b"\\udfff\\ud800", b"\xed\xa0\x80", b"a\\u0000"))
    digits = st.integers(1, 6000).map(lambda n: b"9" * n)
    return st.one_of(
        nested(b"", b"["),
        nested(b"", b'{"a":'),
        texts.map(lambda text: record % (text, b"1")),
        digits.map(lambda number: record % (b"a", number)),
        digits.map(lambda number: b'{"matrix":{"rows":[[%s]],"side":1}}' % number),
        digits.map(lambda number: b'{"matrix":{"rows":[[1]],"side":%s}}' % number),
    )


@given(body=st.one_of(messages(encoded("json")), json_extremes()))
@FUZZ
def test_json_decodes_or_is_refused(body: bytes) -> None:
    decodes_or_refuses("json", "application/json", body)


def cbor_extremes() -> st.SearchStrategy[bytes]:
    """Every semantic tag cbor2 knows (and others) over any item; nesting; huge heads."""
    tag = st.sampled_from(
        (0, 1, 2, 3, 4, 5, 25, 28, 29, 30, 35, 36, 37, 100, 256, 258, 260, 261, 1004, 55799)
    ).map(lambda number: b"\xd9" + number.to_bytes(2, "big"))
    heads = st.sampled_from((b"\x5b", b"\x7b", b"\x9b", b"\xbb", b"\xdb", b"\x1b", b"\x3b"))
    huge = heads.map(lambda head: head + (2**63).to_bytes(8, "big"))
    return st.one_of(
        st.tuples(tag, st.binary(max_size=20)).map(b"".join),
        st.tuples(tag, huge).map(b"".join),
        nested(b"", b"\x81"),
        nested(b"", b"\xa1\x00"),
        nested(b"", b"\xd8\x1c"),
    )


@given(body=st.one_of(messages(encoded("cbor")), cbor_extremes()))
@FUZZ
def test_cbor_decodes_or_is_refused(body: bytes) -> None:
    decodes_or_refuses("cbor", "application/cbor", body)


# Any text, lone surrogates included (JSON's \ud800 escapes decode to them).
_ANY_TEXT = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=6)
_TREE_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    _ANY_TEXT,
    st.sampled_from(("matrix", "records", "rows", "side", "text", "number", "flag")),
)
TREES = st.recursive(
    _TREE_LEAF,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(_ANY_TEXT, st.sampled_from(("matrix", "records", "rows", "side"))),
            children,
            max_size=4,
        ),
    ),
    max_leaves=30,
)


def record_trees() -> st.SearchStrategy[object]:
    record = st.fixed_dictionaries(
        {"text": _ANY_TEXT, "number": st.integers(-(2**40), 2**40), "flag": st.booleans()}
    )
    return st.lists(record, max_size=4).map(lambda records: {"records": records})


@given(tree=st.one_of(TREES, record_trees()))
@FUZZ
def test_any_tree_is_a_dataset_or_refused(tree: object) -> None:
    try:
        dataset = from_tree(tree, "tree")
    except DecodeError:
        return
    clean(dataset)


# the request's header fields, and the server's answer to our client ---------------------------

HEADER_VALUES = st.one_of(
    st.binary(max_size=80),
    st.sampled_from(
        [b"0" * 64, b"A" * 64, b"g" * 64, b"9" * 5000, b"-1", b" 12", b"1_0", b'""']
        + [encoding.media_type.encode() for encoding in ENCODINGS.values()]
    ),
)


@given(
    fields=st.dictionaries(
        st.sampled_from((b"content-type", DIGEST_HEADER, SOAP_ACTION_HEADER, b"content-length")),
        HEADER_VALUES,
    )
)
@FUZZ
def test_any_request_header_fields_are_served_or_refused_and_counted(
    fields: dict[bytes, bytes],
) -> None:
    handler = PayloadHandler(1000)
    answer = handler.handle(Request(b"POST", PATH, fields))
    if isinstance(answer, Reply):
        assert answer.status in (400, 415)
        assert len(bytes(answer.body).splitlines()) == 1 and bytes(answer.body).endswith(b"\n")
        assert handler.refusals == {answer.status: 1}
    else:
        assert isinstance(answer, Streamed)
        assert handler.refusals in ({}, {413: 1})  # 413: a declared length over the limit


@given(
    fields=st.dictionaries(
        st.sampled_from((DECODE_CPU_HEADER, RSS_PEAK_HEADER, RSS_ADDED_HEADER)), HEADER_VALUES
    )
)
@FUZZ
def test_any_answer_figures_are_read_or_refused(fields: dict[bytes, bytes]) -> None:
    try:
        figures = DecodeFigures.from_headers(fields)
    except PeerProtocolError:
        return
    assert min(figures.cpu_ns, figures.rss_peak_bytes, figures.rss_added_bytes) >= 0
