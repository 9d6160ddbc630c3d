"""A real small disk for tests of what a full one does: a tmpfs mounted in a temporary folder,
and a way to fill it. Mounting needs root; without it the test is skipped, saying so, except
in CI, where it is a failure."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: "2m") mounted at `where` (made here), unmounted after."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        message = f"mounting a tmpfs failed: {mounted.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(f"CI must be able to fill a real disk: {message}")
        pytest.skip(f"{message} (needs root; CI runs it)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; the file, whose removal frees the space."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:  # unbuffered: the write that finds the disk full raises, nothing is left
            handle.write(b"\0" * 65536)
    return filler
