"""The blob workload's bodies: deterministic bytes for each size, which both sides derive, so
the client can check every byte of what arrives.

The body of `size` bytes repeats a 251-byte block drawn from the size's sha256. 251 is prime
and not a power of two: a byte out of place (a slice at the wrong offset, a frame counted
twice) changes the body's digest."""

from __future__ import annotations

import hashlib

BLOCK_BYTES = 251
# A blob's path: this, then its size in decimal.
PATH_PREFIX = "/blob/"


def blob_body(size: int) -> bytes:
    seed = hashlib.sha256(b"h2iot-blob:%d" % size).digest()
    block = bytes(seed[i % len(seed)] ^ (i * 7 & 0xFF) for i in range(BLOCK_BYTES))
    return (block * (size // BLOCK_BYTES + 1))[:size]


def blob_sha256(size: int) -> str:
    return hashlib.sha256(blob_body(size)).hexdigest()
