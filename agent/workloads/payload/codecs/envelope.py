"""The SOAP 1.1 envelope of the soap, swa and dime encodings: written as text, parsed with the
standard library's expat safely. Pure.

SOAP 1.1 (section 3) says a message must not contain a document type declaration, so the parser
refuses any DOCTYPE at its start, before an internal subset (where an entity bomb would be
declared) is read: no entity is ever defined, and a reference to one is an expat error. Nesting
deeper than the envelope's own shape is refused as it opens.

The body holds one operation element, `p:send`, with either the values inline (SOAP encoding's
arrays, every value as text) or one `data` element whose `href` names the attachment:

    <matrix soapenc:arrayType="xsd:double[side,side]"><item>1.5</item>...</matrix>
    <records soapenc:arrayType="p:Record[m]"><item><text>s</text><number>7</number>
        <flag>true</flag></item>...</records>
    <data href="cid:payload@h2iot"/>
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from xml.parsers import expat

from agent.workloads.payload.dataset import (
    INT32_MAX,
    INT32_MIN,
    Dataset,
    Matrix,
    Record,
    Structs,
)
from agent.workloads.payload.errors import DecodeError, EncodeError
from agent.workloads.payload.limits import MAX_RECORDS, MAX_SIDE

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP_ENC = "http://schemas.xmlsoap.org/soap/encoding/"
OPERATION_NS = "urn:h2iot:payload"
# The deepest element a valid envelope has: Envelope/Body/send/records/item/text.
MAX_DEPTH = 6

_OPEN = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    f'<soapenv:Envelope xmlns:soapenv="{SOAP_ENV}" xmlns:soapenc="{SOAP_ENC}"'
    ' xmlns:xsd="http://www.w3.org/2001/XMLSchema"'
    ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
    f'<soapenv:Body><p:send xmlns:p="{OPERATION_NS}" soapenv:encodingStyle="{SOAP_ENC}">'
)
_CLOSE = "</p:send></soapenv:Body></soapenv:Envelope>"
# XML Schema's lexical forms of the non-finite doubles; repr's are "inf", "-inf", "nan".
_XSD_SPECIAL = {"inf": "INF", "-inf": "-INF", "nan": "NaN"}
# Characters XML 1.0 cannot carry at all, even as references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ARRAY_TYPE = re.compile(r"xsd:double\[(\d{1,9}),(\d{1,9})\]\Z")
_RECORD_TYPE = re.compile(r"p:Record\[(\d{1,9})\]\Z")
_ENVELOPE, _BODY, _SEND = f"{SOAP_ENV} Envelope", f"{SOAP_ENV} Body", f"{OPERATION_NS} send"
_ARRAY_TYPE_ATTR = f"{SOAP_ENC} arrayType"
_FIELDS = ("text", "number", "flag")


@dataclass(frozen=True)
class Reference:
    """An envelope whose data is an attachment: the `href` naming it."""

    href: str


def _double(value: float) -> str:
    text = repr(value)
    return _XSD_SPECIAL.get(text, text)


def _text(value: str) -> str:
    if _NOT_XML.search(value):
        raise EncodeError(f"text {value!r} holds a character XML 1.0 cannot carry")
    # \r is escaped because a parser turns a literal one into \n (XML 1.0 section 2.11).
    return value.translate(_ESCAPES)


def _inline(dataset: Dataset) -> Iterable[str]:
    if isinstance(dataset, Matrix):
        side = dataset.side
        yield f'<matrix soapenc:arrayType="xsd:double[{side},{side}]">'
        yield from (f"<item>{_double(value)}</item>" for value in dataset.values)
        yield "</matrix>"
        return
    yield f'<records soapenc:arrayType="p:Record[{len(dataset.records)}]">'
    for record in dataset.records:
        if not INT32_MIN <= record.number <= INT32_MAX:
            raise EncodeError(f"number {record.number} is outside xsd:int")
        yield (
            f"<item><text>{_text(record.text)}</text><number>{record.number}</number>"
            f"<flag>{'true' if record.flag else 'false'}</flag></item>"
        )
    yield "</records>"


def write_inline(dataset: Dataset) -> bytes:
    """The envelope with every value as XML text (the soap encoding)."""
    return "".join((_OPEN, *_inline(dataset), _CLOSE)).encode()


def write_reference(href: str) -> bytes:
    """The envelope naming an attachment (swa, dime)."""
    return f'{_OPEN}<data href="{_text(href)}"/>{_CLOSE}'.encode()


def shown_name(name: str) -> str:
    """An expat name ("namespace local") as its local part."""
    return name.rsplit(" ", 1)[-1]


def _refuse_doctype(*_: object) -> None:
    raise DecodeError("envelope: a DOCTYPE is not allowed in a SOAP message")


class _EnvelopeReader:
    """expat's callbacks as a state machine over the envelope's fixed shape."""

    def __init__(self) -> None:
        self.path: list[str] = []
        self.text: list[str] = []
        self.kind: str | None = None
        self.claimed = 0
        self.expected = 0  # items the arrayType announces: more are refused as they come
        self.values: array[float] = array("d")
        self.records: list[Record] = []
        self.fields: dict[str, str] = {}
        self.href: str | None = None

    def where(self) -> str:
        return "envelope: " + "/".join(map(shown_name, self.path))

    def start(self, name: str, attrs: dict[str, str]) -> None:
        path = self.path
        depth = len(path)
        if depth >= MAX_DEPTH:
            raise DecodeError(f"{self.where()}: nested deeper than {MAX_DEPTH} elements")
        parent = path[-1] if path else None
        expected: tuple[str, ...]
        if parent is None:
            expected = (_ENVELOPE,)
        elif parent == _ENVELOPE:
            expected = (_BODY,)
        elif parent == _BODY:
            expected = (_SEND,)
        elif parent == _SEND:
            expected = () if self.kind is not None else ("matrix", "records", "data")
        elif parent in ("matrix", "records"):
            expected = ("item",)
        elif parent == "item" and self.kind == "records":
            expected = _FIELDS
        else:
            expected = ()
        if name not in expected:
            raise DecodeError(f"{self.where()}: unexpected element {shown_name(name)!r}")
        if any(not piece.isspace() for piece in self.text):
            raise DecodeError(f"{self.where()}: unexpected text before {shown_name(name)!r}")
        path.append(name)
        if parent == _SEND:
            self._open_data(name, attrs)
        self.text.clear()

    def _open_data(self, name: str, attrs: dict[str, str]) -> None:
        self.kind = name
        if name == "data":
            href = attrs.get("href")
            if not href:
                raise DecodeError(f"{self.where()}: no href naming the attachment")
            self.href = href
            return
        array_type = attrs.get(_ARRAY_TYPE_ATTR, "")
        if name == "matrix":
            match = _ARRAY_TYPE.match(array_type)
            if match is None or match[1] != match[2]:
                raise DecodeError(
                    f"{self.where()}: arrayType {array_type!r} is not xsd:double[n,n]"
                )
            self.claimed = int(match[1])
            if self.claimed > MAX_SIDE:
                raise DecodeError(
                    f"{self.where()}: side {self.claimed} is over the limit {MAX_SIDE}"
                )
            self.expected = self.claimed * self.claimed
            return
        match = _RECORD_TYPE.match(array_type)
        if match is None:
            raise DecodeError(f"{self.where()}: arrayType {array_type!r} is not p:Record[m]")
        self.claimed = self.expected = int(match[1])
        if self.claimed > MAX_RECORDS:
            raise DecodeError(
                f"{self.where()}: {self.claimed} records are over the limit {MAX_RECORDS}"
            )

    def end(self, name: str) -> None:
        text = "".join(self.text)
        self.text.clear()
        kind = self.kind
        if name == "item":
            if len(self.values) + len(self.records) >= self.expected:
                raise DecodeError(
                    f"{self.where()}: more items than the arrayType's {self.expected}"
                )
            if kind == "matrix":
                self._value(text)
            else:
                self._record()
        elif name in _FIELDS and len(self.path) == MAX_DEPTH:
            if name in self.fields:
                raise DecodeError(f"{self.where()}: {name} given twice")
            self.fields[name] = text
        elif text.strip():
            raise DecodeError(f"{self.where()}: unexpected text {text[:40]!r}")
        self.path.pop()

    def _value(self, text: str) -> None:
        try:
            self.values.append(float(text))
        except ValueError:
            raise DecodeError(
                f"{self.where()}[{len(self.values)}]: {text[:40]!r} is not an xsd:double"
            ) from None

    def _record(self) -> None:
        fields = self.fields
        index = len(self.records)
        if len(fields) != len(_FIELDS):
            missing = ", ".join(name for name in _FIELDS if name not in fields)
            raise DecodeError(f"{self.where()}[{index}]: missing {missing}")
        number_text, flag_text = fields["number"].strip(), fields["flag"].strip()
        try:
            number = int(number_text)
        except ValueError:
            raise DecodeError(
                f"{self.where()}[{index}]: number {number_text[:40]!r} is not an xsd:int"
            ) from None
        if not INT32_MIN <= number <= INT32_MAX:
            raise DecodeError(f"{self.where()}[{index}]: number {number} is outside xsd:int")
        if flag_text in ("true", "1"):
            flag = True
        elif flag_text in ("false", "0"):
            flag = False
        else:
            raise DecodeError(
                f"{self.where()}[{index}]: flag {flag_text[:40]!r} is not an xsd:boolean"
            )
        self.records.append(Record(fields["text"], number, flag))
        fields.clear()

    def result(self) -> Dataset | Reference:
        if self.href is not None:
            return Reference(self.href)
        if self.kind == "matrix":
            side = self.claimed
            if len(self.values) != side * side:
                raise DecodeError(
                    f"envelope: matrix: arrayType says {side}x{side}, "
                    f"{len(self.values)} items given"
                )
            return Matrix(side, self.values)
        if self.kind == "records":
            if len(self.records) != self.claimed:
                raise DecodeError(
                    f"envelope: records: arrayType says {self.claimed}, "
                    f"{len(self.records)} items given"
                )
            return Structs(tuple(self.records))
        raise DecodeError("envelope: p:send holds no matrix, records or data")


def read(body: bytes | memoryview) -> Dataset | Reference:
    """The envelope's values, or the reference to its attachment; DecodeError otherwise."""
    reader = _EnvelopeReader()
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.text.append
    try:
        parser.Parse(bytes(body), True)
    except expat.ExpatError as exc:
        raise DecodeError(
            f"envelope: not well-formed XML at line {exc.lineno}, column {exc.offset}: "
            f"{expat.ErrorString(exc.code)}"
        ) from None
    except (LookupError, ValueError) as exc:  # an XML declaration naming an unknown encoding
        raise DecodeError(f"envelope: {exc}") from None
    return reader.result()
