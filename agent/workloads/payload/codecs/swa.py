"""The swa encoding, SOAP Messages with Attachments (W3C Note, 2000): a multipart/related MIME
message whose root part is the SOAP envelope and whose second part is the packed dataset as
binary, referenced from the envelope by its Content-ID. Built and parsed with the standard
library's email package. Pure.

The HTTP request's Content-Type carries the multipart parameters (boundary, type, start); the
body starts at the first boundary. The email generator rewrites line endings in every part it
writes as text, which would corrupt binary data, so the generator here writes the two parts'
bytes as they are (their Content-Transfer-Encoding is "binary"). The parser is binary-safe as it
is. A message the parser had to repair (a missing boundary, a truncated part) is refused: the
email package records those as defects instead of failing. So is a part holding parts, as it
opens, and whatever else the parser raises on the peer's bytes (a parameter in RFC 2231's form
whose charset cannot decode it): DecodeError, nothing else.
"""

from __future__ import annotations

import secrets
from email import policy
from email.encoders import encode_noop
from email.generator import BytesGenerator
from email.message import Message
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.parser import BytesParser
from email.utils import collapse_rfc2231_value
from io import BytesIO

from agent.workloads.payload.codecs import envelope
from agent.workloads.payload.dataset import Dataset, pack, unpack
from agent.workloads.payload.errors import DecodeError

ENVELOPE_ID = "envelope@h2iot"
DATA_ID = "payload@h2iot"
# MIME wants CRLF between lines; compat32 is the email package's simplest (fastest) policy.
_POLICY = policy.compat32.clone(linesep="\r\n")


class _VerbatimGenerator(BytesGenerator):
    """Writes a part's payload bytes unchanged (the generator's per-type hook, named after the
    part's content type)."""

    def _write_verbatim(self, msg: Message) -> None:
        # `write` encodes its text with surrogateescape: these are the part's bytes again.
        payload = msg.get_payload(decode=True)
        assert isinstance(payload, bytes)
        self.write(payload.decode("ascii", "surrogateescape"))

    _handle_text_xml = _write_verbatim
    _handle_application_octet_stream = _write_verbatim


def _part(data: bytes, subtype: str, content_id: str) -> MIMEApplication:
    part = MIMEApplication(data, subtype, encode_noop, policy=_POLICY)
    if subtype == "xml":
        part.replace_header("Content-Type", "text/xml")
        part.set_param("charset", "utf-8")
    del part["MIME-Version"]
    part["Content-Transfer-Encoding"] = "binary"
    part["Content-ID"] = f"<{content_id}>"
    return part


def encode(dataset: Dataset) -> tuple[str, bytes]:
    data = pack(dataset)
    soap = envelope.write_reference(f"cid:{DATA_ID}")
    boundary = "=_" + secrets.token_hex(16)
    while boundary.encode() in data:  # 2**-128 per position: it will not loop
        boundary = "=_" + secrets.token_hex(16)
    root = MIMEMultipart(
        "related", boundary=boundary, type="text/xml", start=f"<{ENVELOPE_ID}>", policy=_POLICY
    )
    del root["MIME-Version"]
    root.attach(_part(soap, "xml", ENVELOPE_ID))
    root.attach(_part(data, "octet-stream", DATA_ID))
    sink = BytesIO()
    _VerbatimGenerator(sink, policy=_POLICY).flatten(root)
    message = sink.getvalue()
    body = message.partition(b"\r\n\r\n")[2]
    content_type = root["Content-Type"]
    assert isinstance(content_type, str)
    return " ".join(content_type.split()), body


def _content_id(part: Message) -> str:
    value = part.get("Content-ID", "")
    return str(value).strip().removeprefix("<").removesuffix(">")


class _Part(Message):
    """A part that refuses parts of its own. The email parser attaches each part to its
    container as it opens it, and reads a multipart or message/* part inside a part by
    recursing: a few hundred levels (a few bytes each) end in a RecursionError, and until then
    every line is matched against every open boundary. An SwA message is one level deep, so the
    second level is refused as it opens."""

    inside = False  # attached to a container

    def attach(self, payload: Message[str, str] | str) -> None:
        if self.inside:
            raise DecodeError("multipart: a part holds parts of its own")
        if isinstance(payload, _Part):
            payload.inside = True
        super().attach(payload)


def _parse(content_type: str, body: bytes | memoryview) -> Message:
    if "\r" in content_type or "\n" in content_type:
        raise DecodeError("multipart: the Content-Type holds a line break")
    try:
        head = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    except UnicodeEncodeError:
        raise DecodeError("multipart: the Content-Type holds a character beyond Latin-1") from None
    try:
        message = BytesParser(_Part, policy=_POLICY).parsebytes(head + bytes(body))
    except (LookupError, ValueError) as exc:  # an RFC 2231 parameter its charset cannot decode
        raise DecodeError(f"multipart: {exc}") from None
    if message.get_content_type() != "multipart/related":
        raise DecodeError(
            f"multipart: Content-Type {message.get_content_type()} is not multipart/related"
        )
    return message


def _parts(message: Message) -> list[Message]:
    """The message's parts; DecodeError for a message the parser had to repair."""
    defects = list(message.defects)
    payload = message.get_payload()
    parts = (
        [part for part in payload if isinstance(part, Message)] if isinstance(payload, list) else []
    )
    if not parts:
        raise DecodeError(
            "multipart: no parts (" + "; ".join(type(d).__name__ for d in defects) + ")"
        )
    for part in parts:
        defects.extend(part.defects)
    if defects:
        raise DecodeError(
            "multipart: malformed: " + "; ".join(f"{type(d).__name__}" for d in defects)
        )
    return parts


def _start(message: Message) -> str:
    """The start parameter's Content-ID, "" without one."""
    value = message.get_param("start")
    if isinstance(value, tuple):  # RFC 2231's encoded form: (charset, language, text)
        try:
            value = collapse_rfc2231_value(value)
        except (LookupError, ValueError) as exc:
            raise DecodeError(f"multipart: the start parameter: {exc}") from None
    return str(value or "").strip().removeprefix("<").removesuffix(">")


def decode(content_type: str, body: bytes | memoryview) -> Dataset:
    message = _parse(content_type, body)
    parts = _parts(message)
    start = _start(message)
    by_id = {_content_id(part): part for part in parts}
    root = by_id.get(start) if start else parts[0]
    if root is None:
        raise DecodeError(f"multipart: no part has the start parameter's Content-ID <{start}>")
    if root.get_content_type() != "text/xml":
        raise DecodeError(f"multipart: the root part is {root.get_content_type()}, not text/xml")
    found = envelope.read(_payload_bytes(root))
    if not isinstance(found, envelope.Reference):
        return found
    if not found.href.startswith("cid:"):
        raise DecodeError(f"multipart: the envelope's href {found.href!r} is not a cid: URL")
    attachment = by_id.get(found.href[4:])
    if attachment is None:
        raise DecodeError(
            f"multipart: no part has the Content-ID <{found.href[4:]}> the envelope names"
        )
    return unpack(_payload_bytes(attachment), f"multipart part <{found.href[4:]}>")


def _payload_bytes(part: Message) -> bytes:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        raise DecodeError(f"multipart: part <{_content_id(part)}> is itself multipart")
    return payload
