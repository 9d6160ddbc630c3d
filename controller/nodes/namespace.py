"""Calling into another network namespace: `in_netns(path, make)` runs `make` on a thread that
has entered the namespace at `path` (`/run/netns/NAME`, `/proc/PID/ns/net`), so the processes it
starts and the sockets it creates belong there (`setns` changes only the calling thread; a
child inherits its parent thread's namespaces, a socket the namespace it was made in). Needs
CAP_SYS_ADMIN; the thread ends inside the namespace and is never reused."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000


class NetnsError(OSError):
    """The namespace could not be opened or entered; the message names it."""


def same_netns(path: Path) -> bool:
    """Whether `path` names this process's own network namespace."""
    return os.stat(path).st_ino == os.stat("/proc/self/ns/net").st_ino


def in_netns(path: Path, make: Callable[[], T]) -> T:
    """`make()` inside the namespace; NetnsError when it cannot be entered, and whatever `make`
    raises is raised here."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def enter_and_make() -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            failure.append(NetnsError(exc.errno, f"cannot open {path}: {exc.strerror}"))
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                error = ctypes.get_errno()
                failure.append(NetnsError(error, f"cannot enter {path}: {os.strerror(error)}"))
                return
            outcome.append(make())
        except BaseException as exc:
            failure.append(exc)
        finally:
            os.close(fd)

    thread = threading.Thread(target=enter_and_make, name=f"enter-{path}")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]
