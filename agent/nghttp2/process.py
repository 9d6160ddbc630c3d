"""Run one child process to its end and account for it alone: its CPU time and peak RSS from
wait4 (the kernel's figures for that child, not the agent's), its final I/O counters from
/proc/PID/io read while it is a zombie (after it exited, before it is reaped).

The io file is opened as soon as the child exists and read once it is a zombie: a process
without memory (a zombie) has its /proc files owned by root, so an ordinary user's open(2)
of a zombie's io fails with EACCES, while a read through a descriptor opened earlier is checked
against the child's credentials only, which are the user's own.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agent.nghttp2.procfs import parse_io


@dataclass(frozen=True)
class ChildOutcome:
    exit_status: int  # negative: killed by that signal
    stdout: bytes
    stderr: bytes
    timed_out: bool
    cpu_user_s: float
    cpu_sys_s: float
    rss_peak_bytes: int
    io: dict[str, int] | None  # /proc/PID/io at exit; None where unreadable (io_unavailable)
    t_mono_start_ns: int
    t_mono_end_ns: int
    t_wall_start_ns: int
    io_unavailable: str | None = None  # why io is None

    @property
    def wall_s(self) -> float:
        return (self.t_mono_end_ns - self.t_mono_start_ns) / 1e9


def _drain(process: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes, bool]:
    """Read stdout and stderr to their ends; kill the child at the deadline."""
    assert process.stdout is not None and process.stderr is not None
    chunks: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            selector.register(stream.fileno(), selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                timed_out = True
                process.kill()
            for key, _ in selector.select(timeout=max(left, 0.05) if not timed_out else 1.0):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
    return (
        b"".join(chunks[process.stdout.fileno()]),
        b"".join(chunks[process.stderr.fileno()]),
        timed_out,
    )


def run_child(argv: Sequence[str], timeout_s: float) -> ChildOutcome:
    """Run argv with stdin closed, stdout and stderr captured; kill it after timeout_s."""
    t_wall_start = time.time_ns()
    t_mono_start = time.monotonic_ns()
    process = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    io_fd: int | None = None
    io: dict[str, int] | None = None
    io_unavailable: str | None = None
    try:
        try:
            io_fd = os.open(f"/proc/{process.pid}/io", os.O_RDONLY)
        except OSError as exc:
            io_unavailable = f"/proc/{process.pid}/io: {exc.strerror} (before the child ran)"
        stdout, stderr, timed_out = _drain(process, time.monotonic() + timeout_s)
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        t_mono_end = time.monotonic_ns()
        if io_fd is not None:
            try:
                io = parse_io(os.pread(io_fd, 4096, 0).decode("ascii"))
            except OSError as exc:
                io_unavailable = f"/proc/{process.pid}/io: {exc.strerror} (at exit)"
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        if io_fd is not None:
            os.close(io_fd)
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return ChildOutcome(
        exit_status=process.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        cpu_user_s=usage.ru_utime,
        cpu_sys_s=usage.ru_stime,
        rss_peak_bytes=usage.ru_maxrss * 1024,
        io=io,
        t_mono_start_ns=t_mono_start,
        t_mono_end_ns=t_mono_end,
        t_wall_start_ns=t_wall_start,
        io_unavailable=io_unavailable,
    )
