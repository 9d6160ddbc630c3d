"""DIME, Direct Internet Message Encapsulation (draft-nielsen-dime-02, June 2002), written from
the specification, and the dime encoding over it: the SOAP envelope in the first record, the
packed dataset in the second, referenced by its ID. Pure. There is no maintained library.

A record is a 12-octet header and four fields, each padded with zero octets to a multiple of 4:

    VERSION (5 bits, 1) | MB | ME | CF | TYPE_T (4 bits) | reserved (4 bits) | OPTIONS_LENGTH (16)
    ID_LENGTH (16) | TYPE_LENGTH (16)
    DATA_LENGTH (32)
    OPTIONS, ID, TYPE, DATA

MB marks a message's first record and ME its last; CF says the payload goes on in the next
record (a chunk). Only the first chunk of a payload carries its TYPE_T, TYPE and ID; the others
have TYPE_T "unchanged", no type and no ID. Every length is checked against what is left of the
body before anything is read, so a record claiming more than the body holds is refused without
allocating it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from agent.workloads.payload.codecs import envelope
from agent.workloads.payload.dataset import Dataset, pack, unpack
from agent.workloads.payload.errors import DecodeError

CONTENT_TYPE = "application/dime"
VERSION = 1
HEADER_BYTES = 12
MAX_FIELD_BYTES = 0xFFFF  # OPTIONS, ID and TYPE lengths are 16 bits
MAX_DATA_BYTES = 0xFFFFFFFF

# TYPE_T
TYPE_UNCHANGED = 0x00
TYPE_MEDIA = 0x01
TYPE_URI = 0x02
TYPE_UNKNOWN = 0x03
TYPE_NONE = 0x04

SOAP_TYPE = b"http://schemas.xmlsoap.org/soap/envelope/"
DATA_TYPE = b"application/octet-stream"
DATA_ID = b"urn:h2iot:payload:data"

_HEADER = struct.Struct(">BBHHHI")
_MB, _ME, _CF = 0x04, 0x02, 0x01
_ZEROS = bytes(3)


def padded(length: int) -> int:
    return (length + 3) & ~3


@dataclass(frozen=True)
class WireRecord:
    """One record as on the wire (a payload or one chunk of it)."""

    message_begin: bool
    message_end: bool
    chunked: bool
    type_format: int
    type: bytes
    id: bytes
    data: bytes | memoryview
    options: bytes = b""

    def header(self) -> bytes:
        flags = (
            (VERSION << 3) | (_MB if self.message_begin else 0) | (_ME if self.message_end else 0)
        )
        flags |= _CF if self.chunked else 0
        return _HEADER.pack(
            flags,
            self.type_format << 4,
            len(self.options),
            len(self.id),
            len(self.type),
            len(self.data),
        )


@dataclass(frozen=True)
class Payload:
    """A payload with its chunks joined."""

    type_format: int
    type: bytes
    id: bytes
    data: bytes | memoryview


def chunks_of(payload: Payload, chunk_bytes: int) -> list[WireRecord]:
    """The payload as records of at most `chunk_bytes` data each (0: one record); MB and ME are
    set by `write`."""
    data = memoryview(payload.data)
    if chunk_bytes <= 0 or len(data) <= chunk_bytes:
        return [
            WireRecord(False, False, False, payload.type_format, payload.type, payload.id, data)
        ]
    pieces = [data[start : start + chunk_bytes] for start in range(0, len(data), chunk_bytes)]
    records = [
        WireRecord(False, False, True, payload.type_format, payload.type, payload.id, pieces[0])
    ]
    records.extend(
        WireRecord(False, False, True, TYPE_UNCHANGED, b"", b"", piece) for piece in pieces[1:-1]
    )
    records.append(WireRecord(False, False, False, TYPE_UNCHANGED, b"", b"", pieces[-1]))
    return records


def _fields(record: WireRecord) -> Iterable[bytes | memoryview]:
    yield record.header()
    for field in (record.options, record.id, record.type, record.data):
        yield field
        yield _ZEROS[: padded(len(field)) - len(field)]


def write(records: Sequence[WireRecord]) -> bytes:
    """A DIME message of the records, in order, MB set on the first and ME on the last."""
    if not records:
        raise ValueError("a DIME message has at least one record")
    last = len(records) - 1
    marked = [
        WireRecord(
            index == 0, index == last, r.chunked, r.type_format, r.type, r.id, r.data, r.options
        )
        for index, r in enumerate(records)
    ]
    for record in marked:
        if max(len(record.options), len(record.id), len(record.type)) > MAX_FIELD_BYTES:
            raise ValueError("a DIME OPTIONS, ID or TYPE field holds at most 65535 bytes")
        if len(record.data) > MAX_DATA_BYTES:
            raise ValueError("a DIME record holds at most 2**32 - 1 data bytes")
    return b"".join(field for record in marked for field in _fields(record))


def read_records(body: bytes | memoryview) -> list[WireRecord]:
    """Every record of a DIME message, checked (iter_records)."""
    return list(iter_records(body))


def iter_records(body: bytes | memoryview) -> Iterator[WireRecord]:
    """The records of a DIME message one by one, each checked as it is read: version, reserved
    bits, MB on the first record only, lengths within the body, nothing after ME; at the end,
    ME on the last record."""
    view = memoryview(body)
    index = offset = 0
    message_end = False
    while offset < len(view):
        record, end = _record_at(view, offset, index)
        message_end = record.message_end
        if message_end and end != len(view):
            raise DecodeError(
                f"DIME record {index} at byte {offset}: ME is set but "
                f"{len(view) - end} bytes follow"
            )
        yield record
        index += 1
        offset = end
    if not index:
        raise DecodeError("DIME message: empty body")
    if not message_end:
        raise DecodeError(f"DIME record {index - 1}: the last record lacks ME")


def _record_at(view: memoryview, offset: int, index: int) -> tuple[WireRecord, int]:
    """The record at `offset` and the offset after it."""
    where = f"DIME record {index} at byte {offset}"
    if len(view) - offset < HEADER_BYTES:
        raise DecodeError(f"{where}: {len(view) - offset} bytes left, a header takes 12")
    flags, type_byte, options_length, id_length, type_length, data_length = _HEADER.unpack_from(
        view, offset
    )
    version = flags >> 3
    if version != VERSION:
        raise DecodeError(f"{where}: VERSION {version}, only 1 is known")
    if type_byte & 0x0F:
        raise DecodeError(f"{where}: reserved bits set")
    if bool(flags & _MB) != (index == 0):
        raise DecodeError(f"{where}: MB must be set on the first record and only there")
    lengths = (options_length, id_length, type_length, data_length)
    total = HEADER_BYTES + sum(padded(length) for length in lengths)
    if total > len(view) - offset:
        raise DecodeError(
            f"{where}: its lengths claim {total} bytes, the body has {len(view) - offset} left"
        )
    start = offset + HEADER_BYTES
    fields = []
    for length in lengths:
        fields.append(view[start : start + length])
        start += padded(length)
    options, id_, type_, data = fields
    record = WireRecord(
        bool(flags & _MB),
        bool(flags & _ME),
        bool(flags & _CF),
        type_byte >> 4,
        bytes(type_),
        bytes(id_),
        data,
        bytes(options),
    )
    return record, offset + total


def reassemble(records: Iterable[WireRecord]) -> list[Payload]:
    """The payloads, each chunk chain joined (iter_payloads)."""
    return list(iter_payloads(records))


def iter_payloads(records: Iterable[WireRecord]) -> Iterator[Payload]:
    """The payloads one by one, each chunk chain joined as it arrives; DecodeError for a chain
    that breaks the rules. Only the payload being joined is held: a message of millions of
    small records costs its records' time, not their memory."""
    first: WireRecord | None = None
    joined = bytearray()
    index = -1
    for index, record in enumerate(records):
        where = f"DIME record {index}"
        if first is None:
            _check_type(record, where)
            if not record.chunked:
                yield Payload(record.type_format, record.type, record.id, record.data)
                continue
            first = record
        elif record.type_format != TYPE_UNCHANGED or record.type or record.id:
            raise DecodeError(
                f"{where}: a chunk after the first must have TYPE_T 0, no TYPE, no ID"
            )
        joined += record.data
        if not record.chunked:
            yield Payload(first.type_format, first.type, first.id, memoryview(joined))
            first = None
            joined = bytearray()
    if first is not None:
        raise DecodeError(f"DIME record {index}: the message ends inside a chunked payload")


def _check_type(record: WireRecord, where: str) -> None:
    type_format = record.type_format
    if type_format == TYPE_UNCHANGED:
        raise DecodeError(f"{where}: TYPE_T 0 (unchanged) on a payload's first record")
    if type_format in (TYPE_MEDIA, TYPE_URI):
        if not record.type:
            raise DecodeError(f"{where}: TYPE_T {type_format} needs a TYPE")
    elif type_format == TYPE_UNKNOWN:
        if record.type:
            raise DecodeError(f"{where}: TYPE_T 3 (unknown) must have no TYPE")
    elif type_format == TYPE_NONE:
        if record.type or len(record.data) or record.chunked:
            raise DecodeError(f"{where}: TYPE_T 4 (none) must have no TYPE and no data")
    else:
        raise DecodeError(f"{where}: TYPE_T {type_format} is not defined")


def encode(dataset: Dataset, chunk_bytes: int = 0) -> tuple[str, bytes]:
    """The envelope and the packed data as a DIME message, the data in chunks of `chunk_bytes`
    (0: one record)."""
    soap = Payload(TYPE_URI, SOAP_TYPE, b"", envelope.write_reference(DATA_ID.decode()))
    data = Payload(TYPE_MEDIA, DATA_TYPE, DATA_ID, pack(dataset))
    return CONTENT_TYPE, write(chunks_of(soap, 0) + chunks_of(data, chunk_bytes))


def decode(content_type: str, body: bytes | memoryview) -> Dataset:
    """Of the payloads only the envelope and the one it names are kept."""
    payloads = iter_payloads(iter_records(body))
    first = next(payloads)  # iter_records refuses an empty body before this returns
    if first.type_format != TYPE_URI or first.type != SOAP_TYPE:
        raise DecodeError(
            "DIME message: the first payload is not a SOAP envelope (TYPE_T 2, the SOAP URI)"
        )
    found = envelope.read(first.data)
    target = found.href.encode() if isinstance(found, envelope.Reference) else None
    named = None
    for payload in payloads:  # to the end: a message broken after its data is still refused
        if named is None and payload.id == target:
            named = payload
    if not isinstance(found, envelope.Reference):
        return found
    if named is None:
        raise DecodeError(f"DIME message: no payload has the ID {found.href!r} the envelope names")
    return unpack(named.data, f"DIME payload {found.href}")
