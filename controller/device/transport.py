"""A node's transport whose every command runs inside the node's cgroup (local or SSH).

Each command's shell first moves itself into the node's cgroup (writing `$$` to each
`cgroup.procs`), then `exec`s the command: it and everything it starts, in the foreground or in
the background, are in the cgroup from their first instruction. The node's anchor process
itself stays outside: it is the testbed's, not the device's, and its reaper thread polls the
process table (a few % of a core here, which a 0.08 quota would otherwise lose to it). Outside,
it is also never the process the kernel picks when the device runs out of memory. An SSH node's
clock readings and file copies stay outside too: they are the testbed's.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Generic, TypeVar

from controller.nodes.records import ClockOffset, CommandResult
from controller.nodes.transport import Stream, Transport

T = TypeVar("T", bound=Transport)

JOIN_FAILED_STATUS = 125


def joined_command(command: str, procs_files: Sequence[str]) -> str:
    """`command` run by a shell that has joined the cgroups whose `cgroup.procs` are given."""
    joins = " && ".join(f"echo $$ > {shlex.quote(path)}" for path in procs_files)
    failed = f"echo 'h2iot: cannot join the node cgroup' >&2; exit {JOIN_FAILED_STATUS}"
    return f"{{ {joins}; }} 2>/dev/null || {{ {failed}; }}; exec /bin/sh -c {shlex.quote(command)}"


class CgroupTransport(Generic[T]):
    """Wraps a node's transport (`inner`); `procs_files` are the cgroup's `cgroup.procs` on the
    node."""

    def __init__(self, inner: T, procs_files: Sequence[Path | str]) -> None:
        self.label = inner.label
        self.inner = inner
        self._procs = tuple(str(path) for path in procs_files)

    def run(self, command: str, timeout_s: float) -> CommandResult:
        result = self.inner.run(joined_command(command, self._procs), timeout_s)
        return replace(result, command=command)

    def put(self, local: Path, remote: str) -> None:
        self.inner.put(local, remote)

    def clock_offset(self, python: str, samples: int) -> ClockOffset:
        return self.inner.clock_offset(python, samples)

    def open_loopback(self, port: int, timeout_s: float) -> Stream:
        # The testbed's connection, like its clock readings: outside the device's cgroup.
        return self.inner.open_loopback(port, timeout_s)

    def close(self) -> None:
        self.inner.close()
