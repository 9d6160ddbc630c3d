"""Records the node layer returns: frozen, with units in the field names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StopOutcome = Literal["not-running", "terminated", "killed"]
"""How a background process ended: it was already gone, it exited on TERM, or it needed KILL."""


@dataclass(frozen=True)
class CommandResult:
    """One finished command: its output (decoded as UTF-8), exit status (128 + N when a
    signal N killed it) and wall duration; where the transport sees the process itself (a local
    node's anchor), its span on the node's monotonic clock and its CPU time, its descendants'
    included (None elsewhere)."""

    command: str
    stdout: str
    stderr: str
    exit_status: int
    duration_s: float
    process: ProcessSpan | None = None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass(frozen=True)
class ProcessSpan:
    """A command's process from its start to its reaping, on the node's CLOCK_MONOTONIC (the
    clock of an agent's `t_mono_*` fields), and the CPU time it and the children it waited for
    used (getrusage RUSAGE_CHILDREN of the process that reaped it)."""

    t_mono_start_ns: int
    t_mono_end_ns: int
    cpu_s: float

    @property
    def duration_s(self) -> float:
        return (self.t_mono_end_ns - self.t_mono_start_ns) / 1e9


@dataclass(frozen=True)
class BackgroundProcess:
    """A process started in the background on a node, found again through its pidfile."""

    pid: int
    pidfile: str
    log: str


@dataclass(frozen=True)
class NewLines:
    """Complete lines appended to a file since `offset_bytes` and where the next read starts."""

    lines: tuple[str, ...]
    next_offset_bytes: int


@dataclass(frozen=True)
class ClockOffset:
    """The node's clocks minus the controller's, each within +/- `uncertainty_ns`.

    `wall_offset_ns` relates `time.time_ns()` on both sides, `monotonic_offset_ns`
    `time.monotonic_ns()` (meaningful between machines only as measured here, both clocks
    running at nominal rate). A node time t maps to controller time t - offset.
    """

    wall_offset_ns: int
    monotonic_offset_ns: int
    uncertainty_ns: int
    best_round_trip_ns: int
    samples: int

    @classmethod
    def same_clock(cls) -> ClockOffset:
        """A local node reads the controller's own clocks: offset 0, no uncertainty."""
        return cls(0, 0, 0, 0, 0)
