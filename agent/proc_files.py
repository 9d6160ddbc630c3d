"""Files of /proc and /sys the agent reads at every trial, kept open and read again from their
start: a read then costs the kernel's rendering of the text and one or two system calls, without
the path walk, open and close that make up about half of a small /proc file's read from Python.

A /proc or sysfs file renders its text anew on a read from offset 0 (seq_file, kernfs), so a
reading is as fresh as one through a new open. A file that fails a read (a sysfs attribute whose
CPU went offline) is closed and opened afresh next time."""

from __future__ import annotations

from io import FileIO
from pathlib import Path


class ProcFiles:
    """The files read so far, each opened at its first read."""

    def __init__(self) -> None:
        self._open: dict[Path, FileIO] = {}

    def read_text(self, path: Path) -> str:
        """The file's whole text now; raises OSError as Path.read_text does."""
        handle = self._open.get(path)
        if handle is None:
            handle = self._open[path] = FileIO(path, "r")
        try:
            handle.seek(0)
            return handle.readall().decode()
        except OSError:
            del self._open[path]
            handle.close()
            raise

    def text_or_none(self, path: Path) -> str | None:
        """The file's text, None where it cannot be read."""
        try:
            return self.read_text(path)
        except OSError:
            return None
