"""DIME (draft-nielsen-dime-02) against golden vectors assembled by hand, octet by octet, from
the specification's record layout (section 3.1), checked both ways: our reader finds the fields
the vector was written with, and our writer produces the vector from them. Then every rule a
record can break."""

from __future__ import annotations

import struct

import pytest

from agent.workloads.payload.codecs import dime, envelope
from agent.workloads.payload.codecs.dime import Payload, WireRecord
from agent.workloads.payload.errors import DecodeError

SOAP_URI = b"http://schemas.xmlsoap.org/soap/envelope/"  # 41 octets

# One record, a whole message: VERSION 1, MB, ME; TYPE_T 1 (media type).
#   octet 0: 00001 1 1 0 = 0x0E     octet 1: TYPE_T 0001, reserved 0000 = 0x10
ONE_RECORD = bytes.fromhex(
    "0e10 0000"  # flags, TYPE_T, OPTIONS_LENGTH 0
    "0002 000a"  # ID_LENGTH 2, TYPE_LENGTH 10
    "00000005"  # DATA_LENGTH 5
    "69640000"  # "id" + 2 padding
    "746578742f706c61696e0000"  # "text/plain" + 2 padding
    "68656c6c6f000000"  # "hello" + 3 padding
)

# A SOAP envelope record, then one payload in three chunks.
#   A: MB, TYPE_T 2 (URI)                  00001 1 0 0 = 0x0C, 0x20
#   B: CF, TYPE_T 1, ID "urn:x"            00001 0 0 1 = 0x09, 0x10
#   C: CF, TYPE_T 0 (unchanged)            0x09, 0x00
#   D: ME, TYPE_T 0                        00001 0 1 0 = 0x0A, 0x00
CHUNKED = bytes.fromhex(
    "0c200000"
    "00000029"
    "00000004"
    + SOAP_URI.hex()
    + "000000"  # 41 + 3 padding
    + "3c652f3e"  # "<e/>"
    "09100000"
    "00050018"
    "00000004"
    "75726e3a78000000"  # "urn:x" + 3
    + b"application/octet-stream".hex()  # 24, no padding
    + "61626364"  # "abcd"
    "09000000"
    "00000000"
    "00000002"
    "65660000"  # "ef" + 2
    "0a000000"
    "00000000"
    "00000001"
    "67000000"  # "g" + 3
)

CHUNKED_RECORDS = [
    WireRecord(True, False, False, dime.TYPE_URI, SOAP_URI, b"", b"<e/>"),
    WireRecord(False, False, True, dime.TYPE_MEDIA, b"application/octet-stream", b"urn:x", b"abcd"),
    WireRecord(False, False, True, dime.TYPE_UNCHANGED, b"", b"", b"ef"),
    WireRecord(False, True, False, dime.TYPE_UNCHANGED, b"", b"", b"g"),
]


def plain(record: WireRecord) -> tuple[object, ...]:
    return (
        record.message_begin,
        record.message_end,
        record.chunked,
        record.type_format,
        record.type,
        record.id,
        bytes(record.data),
        record.options,
    )


def test_one_record_golden_vector_both_ways() -> None:
    (record,) = dime.read_records(ONE_RECORD)
    expected = WireRecord(True, True, False, dime.TYPE_MEDIA, b"text/plain", b"id", b"hello")
    assert plain(record) == plain(expected)
    assert dime.write([expected]) == ONE_RECORD
    assert dime.reassemble([record]) == [
        Payload(dime.TYPE_MEDIA, b"text/plain", b"id", record.data)
    ]


def test_chunked_golden_vector_both_ways() -> None:
    records = dime.read_records(CHUNKED)
    assert [plain(r) for r in records] == [plain(r) for r in CHUNKED_RECORDS]
    assert dime.write(CHUNKED_RECORDS) == CHUNKED
    soap, data = dime.reassemble(records)
    assert (soap.type_format, soap.type, bytes(soap.data)) == (dime.TYPE_URI, SOAP_URI, b"<e/>")
    assert (data.type, data.id, bytes(data.data)) == (
        b"application/octet-stream",
        b"urn:x",
        b"abcdefg",
    )


def test_the_writer_chunks_as_the_vector_does() -> None:
    payloads = [
        Payload(dime.TYPE_URI, SOAP_URI, b"", b"<e/>"),
        Payload(dime.TYPE_MEDIA, b"application/octet-stream", b"urn:x", b"abcdefg"),
    ]
    """Chunks of at most 4 octets: the first carries TYPE_T, TYPE and ID, the rest none."""
    records = dime.chunks_of(payloads[0], 0) + dime.chunks_of(payloads[1], 4)
    assert [bytes(r.data) for r in records] == [b"<e/>", b"abcd", b"efg"]
    assert [r.chunked for r in records] == [False, True, False]
    assert [r.type_format for r in records] == [dime.TYPE_URI, dime.TYPE_MEDIA, dime.TYPE_UNCHANGED]
    assert [r.id for r in records] == [b"", b"urn:x", b""]


def header(flags: int, type_byte: int, lengths: tuple[int, int, int, int]) -> bytes:
    return struct.pack(">BBHHHI", flags, type_byte, *lengths)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty body"),
        (ONE_RECORD[:11], "a header takes 12"),
        (ONE_RECORD[:-1], "claim 36 bytes, the body has 35"),
        (header(0x0E, 0x10, (0, 0, 0, 0xFFFFFFFF)) + bytes(8), "claim"),
        (header(0x0E, 0x10, (0xFFFF, 0xFFFF, 0xFFFF, 0)), "claim"),
        (header(0x16, 0x10, (0, 0, 0, 0)), "VERSION 2"),
        (header(0x0E, 0x11, (0, 0, 0, 0)), "reserved bits"),
        (header(0x0A, 0x10, (0, 0, 0, 0)), "MB must be set"),
        (header(0x0C, 0x30, (0, 0, 0, 0)), "lacks ME"),
        (ONE_RECORD + ONE_RECORD, "ME is set but 36 bytes follow"),
        (CHUNKED[:-16] + header(0x0A, 0x10, (0, 0, 0, 0)), "after the first must have TYPE_T 0"),
        (header(0x0D, 0x10, (0, 0, 4, 0)) + b"a/bc", "lacks ME"),
    ],
)
def test_broken_records_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        dime.reassemble(dime.read_records(body))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (WireRecord(True, True, False, dime.TYPE_UNCHANGED, b"", b"", b"x"), "unchanged"),
        (WireRecord(True, True, False, dime.TYPE_MEDIA, b"", b"", b"x"), "needs a TYPE"),
        (WireRecord(True, True, False, dime.TYPE_UNKNOWN, b"a/b", b"", b"x"), "must have no TYPE"),
        (WireRecord(True, True, False, dime.TYPE_NONE, b"", b"", b"x"), "no data"),
        (WireRecord(True, True, False, 9, b"", b"", b""), "TYPE_T 9 is not defined"),
        (WireRecord(True, True, True, dime.TYPE_MEDIA, b"a/b", b"", b"x"), "inside a chunked"),
    ],
)
def test_payload_rules_are_enforced(record: WireRecord, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        dime.reassemble(dime.read_records(dime.write([record])))


def test_unknown_and_none_types_are_accepted() -> None:
    records = [
        WireRecord(True, False, False, dime.TYPE_UNKNOWN, b"", b"", b"opaque"),
        WireRecord(False, True, False, dime.TYPE_NONE, b"", b"", b""),
    ]
    assert [p.type_format for p in dime.reassemble(dime.read_records(dime.write(records)))] == [
        3,
        4,
    ]


def test_the_dime_encoding_needs_its_envelope_and_the_named_payload() -> None:
    data = Payload(dime.TYPE_MEDIA, dime.DATA_TYPE, b"urn:other", b"M\x00\x00\x00\x00")
    soap = Payload(dime.TYPE_URI, dime.SOAP_TYPE, b"", b"")
    with pytest.raises(DecodeError, match="not a SOAP envelope"):
        dime.decode(dime.CONTENT_TYPE, dime.write(dime.chunks_of(data, 0)))
    named = Payload(dime.TYPE_URI, dime.SOAP_TYPE, b"", envelope.write_reference("urn:missing"))
    body = dime.write(dime.chunks_of(named, 0) + dime.chunks_of(data, 0))
    with pytest.raises(DecodeError, match="no payload has the ID 'urn:missing'"):
        dime.decode(dime.CONTENT_TYPE, body)
    with pytest.raises(DecodeError, match="not well-formed"):
        dime.decode(dime.CONTENT_TYPE, dime.write(dime.chunks_of(soap, 0)))
