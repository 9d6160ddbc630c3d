"""A GET's response as a client receives it, over HTTP/2 or HTTP/3: its timestamps, headers,
size and digest (or kept body); the responses a connection awaits, by stream; and the request's
header block in both protocols' order."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class Digest(Protocol):
    """What a response's body is hashed with: hashlib's sha256, or SizeOnly."""

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def hexdigest(self) -> str: ...


class SizeOnly:
    """The digest of a body checked by its size alone (a workload's `verify = "size"`, as
    nghttp -nas, the study's client, checks): nothing is hashed."""

    __slots__ = ()

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        pass

    def hexdigest(self) -> str:
        return ""


SIZE_ONLY = SizeOnly()


@dataclass
class Response:
    """One request's response as it arrives; timestamps are monotonic ns."""

    path: str
    t_request_ns: int
    t_headers_ns: int = 0
    t_end_ns: int = 0
    status: int = 0
    headers: dict[bytes, bytes] = field(default_factory=dict)
    size_bytes: int = 0
    digest: Digest = field(default_factory=hashlib.sha256)
    body: bytearray | None = None
    trailers: dict[bytes, bytes] | None = None

    @classmethod
    def of_get(cls, path: str, keep_body: bool, hashed: bool = True) -> Response:
        """The response to a GET of `path` sent now; its body kept with `keep_body`, hashed
        with sha256 unless not `hashed`."""
        return cls(
            path,
            time.monotonic_ns(),
            digest=hashlib.sha256() if hashed else SIZE_ONLY,
            body=bytearray() if keep_body else None,
        )

    def take(self, data: bytes | memoryview) -> None:
        """A piece of the body: counted, hashed, kept if the body is."""
        self.size_bytes += len(data)
        self.digest.update(data)
        if self.body is not None:
            self.body += data


class Awaited:
    """The GET responses a connection awaits, by stream: each filled as its frames arrive, its
    future resolved at its end, or failed with the stream's or the connection's error."""

    __slots__ = ("_by_stream",)

    def __init__(self) -> None:
        self._by_stream: dict[int, tuple[Response, asyncio.Future[Response]]] = {}

    def expect(self, stream_id: int, response: Response) -> asyncio.Future[Response]:
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._by_stream[stream_id] = (response, future)
        return future

    def get(self, stream_id: int) -> Response | None:
        entry = self._by_stream.get(stream_id)
        return None if entry is None else entry[0]

    def end(self, stream_id: int, t_end_ns: int) -> bool:
        """The response on `stream_id` is complete; False if none was awaited there."""
        entry = self._by_stream.pop(stream_id, None)
        if entry is None:
            return False
        response, future = entry
        response.t_end_ns = t_end_ns
        if not future.done():
            future.set_result(response)
        return True

    def fail(self, stream_id: int, error: Exception) -> None:
        entry = self._by_stream.pop(stream_id, None)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(error)

    def fail_all(self, error: Exception) -> None:
        for _response, future in self._by_stream.values():
            if not future.done():
                future.set_exception(error)
        self._by_stream.clear()


def request_headers(
    method: bytes, authority: str, scheme: str, path: str, headers: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    """A request's header block, over HTTP/2 or HTTP/3: pseudo-headers in `headers`
    (`:protocol`) go with the request's own, the rest after them."""
    pseudo = [(name, value) for name, value in headers if name.startswith(b":")]
    regular = [(name, value) for name, value in headers if not name.startswith(b":")]
    return [
        (b":method", method),
        (b":scheme", scheme.encode()),
        (b":authority", authority.encode()),
        (b":path", path.encode()),
        *pseudo,
        (b"user-agent", b"h2iot-agent"),
        *regular,
    ]


def response_status(headers: Mapping[bytes, bytes]) -> int:
    """The :status of a response's headers; 0 if it is missing or no number."""
    try:
        return int(headers.get(b":status", b"0"))
    except ValueError:
        return 0
