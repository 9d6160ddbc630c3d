"""A deterministic source of pseudo-random bytes for the site builder.

SHAKE-256 in counter mode rather than `random`: its output is fixed by the standard, so a site
built from one seed is byte-identical on every Python version and platform (laptop and Pi alike).
"""

from __future__ import annotations

import hashlib


class ByteStream:
    """Reproducible pseudo-random bytes keyed by a string; each `take` continues the stream."""

    def __init__(self, key: str) -> None:
        self._key = key
        self._counter = 0

    def take(self, count: int) -> bytes:
        label = f"{self._key}/{self._counter}".encode()
        self._counter += 1
        return hashlib.shake_256(label).digest(count)

    def child(self, name: str) -> ByteStream:
        """An independent stream, so adding draws to one part leaves the others unchanged."""
        return ByteStream(f"{self._key}/{name}")
