"""Whether processes are gone, by pid: a zombie counts as gone (it runs nothing; its parent, or
init, has yet to reap it)."""

from __future__ import annotations

import contextlib
import time

import psutil


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def survivors(pids: list[int], within_s: float) -> list[str]:
    """The processes among `pids` still running after `within_s`, each as "pid command line"."""
    deadline = time.monotonic() + within_s
    while not all(gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if not gone(pid):
                left.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())}")
    return left
