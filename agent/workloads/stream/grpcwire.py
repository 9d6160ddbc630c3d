"""gRPC over HTTP/2, the parts this workload speaks, pure: length-prefixed messages (a flag
byte, a 4-byte big-endian length, the message), status codes, the percent-encoding of
`grpc-message`, and the numbers a client reads from a call's headers and trailers.

The reader refuses a message as soon as its 5-byte prefix declares more than the limit, before
buffering any of it (RESOURCE_EXHAUSTED, as grpcio does past its max_receive_message_length),
and a compressed one, since this side never offers compression (INTERNAL, as the gRPC spec
asks of a message compressed with no encoding agreed). A message that arrives in many DATA
frames is joined once, when complete.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping

from agent.workloads.stream.errors import GrpcStatusError

CONTENT_TYPE = b"application/grpc"
_PREFIX = struct.Struct(">BI")
# A status or a count (a uint64) in a header: at most 20 decimal digits. Longer is neither, and
# Python's int() refuses a string of thousands of digits with a ValueError of its own.
_MAX_COUNT_DIGITS = 20


class Status(enum.IntEnum):
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    RESOURCE_EXHAUSTED = 8
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14


def frame_message(message: bytes) -> bytes:
    """The 5-byte prefix (uncompressed) and the message."""
    return _PREFIX.pack(0, len(message)) + message


class MessageReader:
    """Messages out of a stream's DATA, as they complete."""

    def __init__(self, max_message_bytes: int) -> None:
        self.max_message_bytes = max_message_bytes
        self._parts: list[bytes] = []  # of the message in progress (its prefix included)
        self._have = 0
        self._need = _PREFIX.size  # bytes the part in progress needs in all
        self._in_prefix = True  # that part is a prefix, else a message

    def feed(self, data: bytes) -> list[bytes]:
        messages: list[bytes] = []
        view = memoryview(data)
        while view:
            take = min(len(view), self._need - self._have)
            self._parts.append(bytes(view[:take]))
            self._have += take
            view = view[take:]
            if self._have < self._need:
                break
            joined = b"".join(self._parts)
            self._parts, self._have = [], 0
            if self._in_prefix:
                flag, length = _PREFIX.unpack(joined)
                self._check(flag, length)
                if length:
                    self._need, self._in_prefix = length, False
                    continue
                messages.append(b"")
            else:
                messages.append(joined)
            self._need, self._in_prefix = _PREFIX.size, True
        return messages

    def _check(self, flag: int, length: int) -> None:
        if flag not in (0, 1):
            raise GrpcStatusError(
                Status.INTERNAL, f"INTERNAL: gRPC message flag {flag:#04x} is not 0 or 1"
            )
        if flag:
            raise GrpcStatusError(
                Status.INTERNAL,
                "INTERNAL: a compressed gRPC message, and no compression was agreed",
            )
        if length > self.max_message_bytes:
            raise GrpcStatusError(
                Status.RESOURCE_EXHAUSTED,
                f"RESOURCE_EXHAUSTED: gRPC message of {length} bytes, more than the "
                f"{self.max_message_bytes} allowed",
            )

    @property
    def partial(self) -> bool:
        """Part of a message is in: the stream must not end here."""
        return bool(self._have) or not self._in_prefix


_UNRESERVED = frozenset(range(0x20, 0x7F)) - {ord("%")}


def encode_grpc_message(text: str) -> bytes:
    """`grpc-message`'s value: UTF-8, percent-encoding every byte outside printable ASCII and
    '%' itself."""
    return b"".join(
        bytes([byte]) if byte in _UNRESERVED else b"%%%02X" % byte for byte in text.encode()
    )


def decode_grpc_message(value: bytes) -> str:
    """The inverse; a malformed escape stays as it is (the spec: never fail on it)."""
    out = bytearray()
    index = 0
    while index < len(value):
        byte = value[index]
        hex_digits = value[index + 1 : index + 3]
        if (
            byte == 0x25
            and len(hex_digits) == 2
            and all(d in b"0123456789abcdefABCDEF" for d in hex_digits)
        ):
            out.append(int(hex_digits, 16))
            index += 3
        else:
            out.append(byte)
            index += 1
    return out.decode(errors="replace")


_MAX_MESSAGE_CHARS = 120


def _one_line(message: str) -> str:
    """The peer's grpc-message as one line of at most _MAX_MESSAGE_CHARS: a refusal's reason
    is one line whatever the peer put in it (a percent-encoded newline, control characters)."""
    printable = "".join(c if c.isprintable() else " " for c in message)
    text = " ".join(printable.split())
    return text if len(text) <= _MAX_MESSAGE_CHARS else f"{text[: _MAX_MESSAGE_CHARS - 3]}..."


def check_status(headers: Mapping[bytes, bytes], *, trailers_only: bool) -> None:
    """Nothing if the call goes on (`trailers_only`: these are the response's headers, without
    a status) or ended OK; GrpcStatusError with the peer's status, or INTERNAL for a status
    that is not a number, otherwise."""
    status = headers.get(b"grpc-status")
    if status is None:
        if trailers_only:
            return
        raise GrpcStatusError(Status.INTERNAL, "gRPC: the call ended without grpc-status")
    if not (status.isdigit() and len(status) <= _MAX_COUNT_DIGITS):
        shown = status[:40].decode(errors="replace")
        raise GrpcStatusError(Status.INTERNAL, f"gRPC: grpc-status {shown!r} is not a code")
    code = int(status)
    if code != Status.OK:
        message = _one_line(decode_grpc_message(headers.get(b"grpc-message", b"")))
        known = {member.value: member.name for member in Status}
        raise GrpcStatusError(code, f"gRPC status {known.get(code, str(code))}: {message}")
    if trailers_only:
        raise GrpcStatusError(Status.INTERNAL, "gRPC: the call ended before any item")


def trailer_count(trailers: Mapping[bytes, bytes], name: bytes) -> int:
    """A count the server put in a trailer; GrpcStatusError (INTERNAL) if it is not one."""
    value = trailers.get(name, b"")
    if not (value.isdigit() and len(value) <= _MAX_COUNT_DIGITS):
        shown = value[:40].decode(errors="replace")
        more = "..." if len(value) > 40 else ""
        raise GrpcStatusError(
            Status.INTERNAL, f"gRPC: trailer {name.decode()} {shown!r}{more} is not a count"
        )
    return int(value)
