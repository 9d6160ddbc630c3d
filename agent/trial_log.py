"""The server's trial log: one JSON line per trial, appended whole or not at all.

The controller reads it line by line from where it stopped (controller/nodes/agent.py). A line
left half-written (a disk that filled mid-write, a server killed mid-write) would be glued to the
next server's first record and hide it, so every server of a run resumes it with the torn tail
cut off, and a write that fails is taken back before the error goes on.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

TAIL_CHUNK_BYTES = 4096


def cut_torn_tail(fd: int) -> int:
    """Truncate the file after its last newline; the bytes cut (0 when it ends whole)."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        start = max(0, end - TAIL_CHUNK_BYTES)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    if end < size:
        os.ftruncate(fd, end)
    return size - end


class TrialLog:
    """Appends trial records to the file at `path`, or to `stream` (standard output) when the
    server was given no file."""

    def __init__(self, path: Path | None, stream: IO[str] = sys.stdout) -> None:
        self.path = path
        self._stream = stream
        self._fd: int | None = None
        if path is not None:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                cut_torn_tail(self._fd)
            except OSError:
                os.close(self._fd)
                raise

    def append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        if self._fd is None:
            self._stream.write(line)
            self._stream.flush()
            return
        data = line.encode("utf-8")
        before = os.fstat(self._fd).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError:
            # Only this process appends; what it wrote of this line is all past `before`.
            os.ftruncate(self._fd, before)
            raise

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
