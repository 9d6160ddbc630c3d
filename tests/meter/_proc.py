"""A process's CPU time as the kernel counts it, read beside a modelled meter: what the power
model's CPU term should have turned into energy, measured in the same run however loaded the
machine was."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# /proc/<pid>/stat fields after the parenthesised command name (index 0 is field 3, the state).
_UTIME, _STIME, _CUTIME, _CSTIME = 11, 12, 13, 14


def process_cpu_s(pid: int) -> float:
    """User plus system CPU seconds of `pid` and of the children it has reaped (clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(fields[n]) for n in (_UTIME, _STIME, _CUTIME, _CSTIME)) / _TICKS_PER_S
