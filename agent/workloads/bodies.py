"""Response bodies the workloads that serve sized bodies share (blob, periodic): deterministic
bytes for each size, which both sides derive, so the client can check every byte of what
arrives.

The body of `size` bytes repeats a 251-byte block drawn from the size's sha256. 251 is prime
and not a power of two: a byte out of place (a slice at the wrong offset, a frame counted
twice) changes the body's digest."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from agent.workloads.spec import Param, ParamError

BLOCK_BYTES = 251


def blob_body(size: int) -> bytes:
    seed = hashlib.sha256(b"h2iot-blob:%d" % size).digest()
    block = bytes(seed[i % len(seed)] ^ (i * 7 & 0xFF) for i in range(BLOCK_BYTES))
    return (block * (size // BLOCK_BYTES + 1))[:size]


def blob_sha256(size: int) -> str:
    return hashlib.sha256(blob_body(size)).hexdigest()


class Bodies:
    """Bodies by size, built once and kept (the `kept` most recently asked for), so no trial
    pays for building one after its first request of that size: a sweep over sizes meets each
    again."""

    def __init__(self, kept: int = 4) -> None:
        self._kept = kept
        self._bodies: OrderedDict[int, memoryview] = OrderedDict()

    def of(self, size: int) -> memoryview:
        body = self._bodies.pop(size, None)
        if body is None:
            body = memoryview(blob_body(size))
            while len(self._bodies) >= self._kept:
                self._bodies.popitem(last=False)
        self._bodies[size] = body
        return body


def size_in_path(path: str, prefix: str, size: Param) -> int | None:
    """The size a request's path asks for (`prefix`, then decimal digits within the `size`
    param's range, any query ignored); None for any other path."""
    path = path.split("?", 1)[0]
    digits = path[len(prefix) :]
    if not path.startswith(prefix) or not digits.isdigit():
        return None
    try:
        return int(size.parse(digits))
    except ParamError:
        return None
