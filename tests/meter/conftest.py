"""Fixtures shared by the meter tests."""

from __future__ import annotations

import contextlib
import os
import tty

import pytest


@pytest.fixture
def pty_pair():
    """A raw pseudo-terminal: (master fd, the slave's path for pyserial)."""
    master, slave = os.openpty()
    tty.setraw(slave)
    yield master, os.ttyname(slave)
    for fd in (master, slave):
        with contextlib.suppress(OSError):
            os.close(fd)
