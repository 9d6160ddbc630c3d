"""What a hostile or broken body gets from the payload decoders: a DecodeError naming the fault,
found before the memory the body claims is taken. Memory is measured with tracemalloc (which
sees the C extensions' allocations too: cbor2, expat, json)."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable

import pytest

from agent.workloads.payload.codecs import ENCODINGS, dime, envelope, swa
from agent.workloads.payload.dataset import make_dataset
from agent.workloads.payload.errors import DecodeError
from agent.workloads.payload.limits import MAX_RECORDS, MAX_SIDE

# Far below what any claim below would take if it were believed (hundreds of MiB to EiB).
BOUND_BYTES = 4 * 2**20

SOAP_OPEN, SOAP_CLOSE = (
    envelope.write_reference("cid:x").split(b"<data")[0],
    (b"</p:send></soapenv:Body></soapenv:Envelope>"),
)

RECORD_OPEN = b'<records soapenc:arrayType="p:Record[1]"><item><text/>'
RECORD_CLOSE = b"</item></records>"

BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + b"".join(
        b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
        for i in range(1, 10)
    )
    + b"]><lolz>&lol9;</lolz>"
)
EXTERNAL_ENTITY = (
    b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
)


def refused_within_bound(decode: Callable[[], object], message: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match=message):
            decode()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < BOUND_BYTES


def soap(body: bytes) -> Callable[[], object]:
    return lambda: ENCODINGS["soap"].decode("text/xml", body)


@pytest.mark.parametrize("body", [BILLION_LAUGHS, EXTERNAL_ENTITY])
def test_xml_entities_are_refused_before_any_expansion(body: bytes) -> None:
    refused_within_bound(soap(body), "DOCTYPE is not allowed")


def test_an_undeclared_entity_is_not_well_formed() -> None:
    body = SOAP_OPEN + b'<matrix soapenc:arrayType="xsd:double[1,1]"><item>&x;</item></matrix>'
    refused_within_bound(soap(body + SOAP_CLOSE), "undefined entity")


def test_deep_nesting_is_refused_as_it_opens() -> None:
    body = SOAP_OPEN + b'<records soapenc:arrayType="p:Record[1]"><item><text>' + b"<x>" * 100_000
    refused_within_bound(soap(body), "nested deeper than 6")
    refused_within_bound(soap(b"<a>" * 100_000), "unexpected element 'a'")


@pytest.mark.parametrize(
    ("array_type", "message"),
    [
        (f"xsd:double[{MAX_SIDE + 1},{MAX_SIDE + 1}]", "over the limit"),
        (f"p:Record[{MAX_RECORDS + 1}]", "over the limit"),
        ("xsd:double[999999999,999999999]", "over the limit"),
        ("xsd:double[2,3]", "is not xsd:double"),
    ],
)
def test_soap_array_claims_are_checked_before_items(array_type: str, message: str) -> None:
    element = b"records" if b"Record" in array_type.encode() else b"matrix"
    body = SOAP_OPEN + b'<%s soapenc:arrayType="%s">' % (element, array_type.encode())
    refused_within_bound(soap(body + b"</%s>" % element + SOAP_CLOSE), message)


def test_soap_items_beyond_the_claim_are_refused_as_they_come() -> None:
    items = b"<item>1.0</item>" * 5
    body = SOAP_OPEN + b'<matrix soapenc:arrayType="xsd:double[2,2]">' + items + b"</matrix>"
    refused_within_bound(soap(body + SOAP_CLOSE), "more items than the arrayType's 4")


@pytest.mark.parametrize(
    ("inner", "message"),
    [
        (
            b'<matrix soapenc:arrayType="xsd:double[1,1]"><item>x</item></matrix>',
            "not an xsd:double",
        ),
        (b'<matrix soapenc:arrayType="xsd:double[1,1]"></matrix>', "1x1, 0 items"),
        (
            RECORD_OPEN + b"<number>1</number>" + RECORD_CLOSE,
            "missing flag",
        ),
        (
            RECORD_OPEN + b"<number>4294967296</number><flag>true</flag>" + RECORD_CLOSE,
            "outside xsd:int",
        ),
        (
            RECORD_OPEN + b"<number>1</number><flag>yes</flag>" + RECORD_CLOSE,
            "not an xsd:boolean",
        ),
        (b"<data/>", "no href"),
        (b"", "holds no matrix"),
        (b"<other/>", "unexpected element 'other'"),
    ],
)
def test_soap_values_are_checked(inner: bytes, message: str) -> None:
    refused_within_bound(soap(SOAP_OPEN + inner + SOAP_CLOSE), message)


def multipart_body() -> tuple[str, bytes]:
    return swa.encode(make_dataset("matrix", 8, 0))


@pytest.mark.parametrize("keep", [0.99, 0.5, 0.05])
def test_truncated_multipart_is_refused(keep: float) -> None:
    content_type, body = multipart_body()
    short = body[: int(len(body) * keep)]
    refused_within_bound(lambda: swa.decode(content_type, short), "malformed|no parts")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ct, b: (ct.replace("related", "mixed"), b), "not multipart/related"),
        (lambda ct, b: (ct.replace("envelope@h2iot", "nowhere"), b), "start parameter"),
        (
            lambda ct, b: (ct, b.replace(b"<payload@h2iot>", b"<other@h2iot>")),
            "no part has the Content-ID",
        ),
        (lambda ct, b: (ct, b.replace(b"text/xml", b"text/plain")), "not text/xml"),
        (lambda ct, b: (ct + "\r\nX: y", b), "line break"),
    ],
)
def test_multipart_structure_is_checked(
    change: Callable[[str, bytes], tuple[str, bytes]], message: str
) -> None:
    content_type, body = change(*multipart_body())
    refused_within_bound(lambda: swa.decode(content_type, body), message)


@pytest.mark.parametrize(
    "item",
    [
        b"\x5b" + (2**62).to_bytes(8, "big") + b"abc",  # byte string of 2**62 bytes
        b"\x7b" + (2**40).to_bytes(8, "big") + b"a",  # text string of 2**40 bytes
        b"\x9b" + (2**32).to_bytes(8, "big") + b"\x01",  # array of 2**32 items
        b"\xba" + (2**31).to_bytes(4, "big") + b"\x01",  # map of 2**31 pairs
        b"\x81" * 100_000,  # nesting
    ],
)
def test_cbor_items_claiming_huge_lengths_are_refused_without_allocating(item: bytes) -> None:
    refused_within_bound(lambda: ENCODINGS["cbor"].decode("application/cbor", item), "CBOR")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000, "nested too deeply|JSON"),
        (b'{"matrix":{"rows":[[NaN]],"side":1}}', "NaN is not a JSON number"),
        (b'{"matrix":{"rows":[[1e999]],"side":1}}', "not a finite number"),
        (b'{"matrix":{"rows":[["1"]],"side":1}}', "hold str, not numbers"),
        (b'{"matrix":{"rows":[[true]],"side":1}}', "hold bool, not numbers"),
        (b'{"matrix":{"rows":[[1.0]],"side":2}}', "not a list of 2 rows"),
        (b'{"matrix":{"rows":[],"side":99999}}', "count up to 1024"),
        (b'{"records":[{"flag":1,"text":"a","number":2}]}', "not \\(string, integer, boolean\\)"),
        (b'{"records":[{"flag":true,"text":"a","number":2147483648}]}', "outside int32"),
        (b'{"records":[{"text":"a","number":2}]}', "not a map of text"),
        (b'{"x":1}', "neither matrix nor records"),
        (b"\xff", "JSON"),
    ],
)
def test_json_is_checked(body: bytes, message: str) -> None:
    refused_within_bound(lambda: ENCODINGS["json"].decode("application/json", body), message)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"S" + (2**32 - 1).to_bytes(4, "little"), "over the limit"),
        (b"S" + (1000).to_bytes(4, "little") + bytes(20), "cannot fit"),
        (b"M" + (2**20).to_bytes(4, "little"), "over the limit"),
        (b"M" + (2).to_bytes(4, "little") + bytes(31), "needs 37 bytes, got 36"),
        (b"X" + bytes(4), "neither"),
        (b"S\x01\x00\x00\x00\xff\xff\xff\xff" + bytes(5), "runs past the end"),
        (b"S\x01\x00\x00\x00\x01\x00\x00\x00\xff" + bytes(5), "not UTF-8"),
        (b"S\x01\x00\x00\x00\x00\x00\x00\x00" + bytes(4) + b"\x02", "flag byte is 2"),
    ],
)
def test_packed_bodies_are_checked(body: bytes, message: str) -> None:
    refused_within_bound(lambda: ENCODINGS["raw"].decode("application/octet-stream", body), message)


def nested_multipart(depth: int) -> bytes:
    return b"".join(
        b'--b%d\r\nContent-Type: multipart/mixed; boundary="b%d"\r\n\r\n' % (level, level + 1)
        for level in range(depth)
    )


@pytest.mark.parametrize(
    "body",
    [
        nested_multipart(2),
        nested_multipart(5000),  # the email parser's recursion: a RecursionError in 60 kB
        b"--b0\r\nContent-Type: message/rfc822\r\n\r\n"
        + b"Content-Type: message/rfc822\r\n\r\n" * 5000,
    ],
)
def test_a_part_holding_parts_is_refused_as_it_opens(body: bytes) -> None:
    content_type = 'multipart/related; boundary="b0"'
    refused_within_bound(lambda: swa.decode(content_type, body), "holds parts of its own")


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/related; boundary*=idna''%FF",  # UnicodeError, not even "replace" helps
        "multipart/related; boundary*=punycode''%FF",
        "multipart/related; boundary*=undefined''x",
        'multipart/related; boundary="\u20ac"',  # beyond Latin-1: no HTTP field's bytes
    ],
)
def test_a_content_type_no_parser_can_read_is_refused(content_type: str) -> None:
    body = multipart_body()[1]
    refused_within_bound(lambda: swa.decode(content_type, body), "multipart: ")


def test_an_encoded_start_parameter_is_decoded() -> None:
    content_type, body = multipart_body()
    encoded = content_type.replace(
        'start="<envelope@h2iot>"', "start*=utf-8''%3Cenvelope%40h2iot%3E"
    )
    assert swa.decode(encoded, body) == swa.decode(content_type, body)
    broken = content_type.replace('start="<envelope@h2iot>"', "start*=idna''%FF")
    refused_within_bound(lambda: swa.decode(broken, body), "the start parameter")


@pytest.mark.parametrize(
    "text",
    [b"\\ud800", b"a\\udfffb", b"\xed\xa0\x80"],  # escapes, and UTF-8 of a surrogate
)
def test_json_text_holding_a_lone_surrogate_is_refused(text: bytes) -> None:
    """The json module decodes both to a lone surrogate; the packed form (and the digest the
    server takes over it) could not be written."""
    body = b'{"records":[{"flag":true,"text":"%s","number":1}]}' % text
    refused_within_bound(
        lambda: ENCODINGS["json"].decode("application/json", body), "a lone surrogate"
    )


def test_a_dime_message_of_many_records_takes_less_memory_than_its_body() -> None:
    """Ten thousand empty records after the envelope, the last without ME: they are checked
    one by one and none is kept (a list of them took about 27 times the body)."""
    message = dime.encode(make_dataset("matrix", 2, 0))[1]
    envelope_record = dime.read_records(message)[0]
    end = (
        dime.HEADER_BYTES
        + dime.padded(len(dime.SOAP_TYPE))
        + dime.padded(len(envelope_record.data))
    )
    empty = struct.pack(">BBHHHI", 0x08, dime.TYPE_NONE << 4, 0, 0, 0, 0)
    body = message[:end] + empty * 10_000
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match="record 10000: the last record lacks ME"):
            dime.decode(dime.CONTENT_TYPE, body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(body)
