"""How many connections the server holds and for how long, sans-IO (time is passed in).

A peer can hold a connection without breaking HTTP/2: send nothing, part of the preface, the
preface without the SETTINGS frame that must follow it, or nothing after its handshake. Enough
such connections would exhaust the process's file descriptors, after which accept() fails with
EMFILE and nobody is served. The limits:

- handshake deadline: the peer's preface *and* first SETTINGS frame (RFC 9113 section 3.4)
  within `handshake_timeout_s`, else GOAWAY SETTINGS_TIMEOUT and close;
- idle timeout: a connection on which nothing progressed (no request arrived, no response byte
  was sent) for `idle_timeout_s` gets GOAWAY NO_ERROR and is closed; PINGs and other frames do
  not count as progress, so they cannot keep a connection forever. A streamed response that
  is quiet at the handler's own pace (its headers sent, nothing queued, the handler still at
  work: a subscription publishing slower than the timeout) keeps its connection; one whose
  bytes wait for the peer's flow-control credit does not;
- connection cap: at most `max_connections` sockets at once (accepted, in their TLS
  handshake, open or closing), by default the lower of two: the descriptor limit less a
  reserve for the files the process itself needs, so the cap is reached before accept() runs
  out of descriptors, and the node's connection memory budget (`connection_budget_bytes`)
  over what one connection costs, so the cap is reached before the node runs out of memory. At
  the cap, accepting pauses while room is made by closing the connections idle longest (still
  in their handshake, or serving nothing); when every connection is serving, new ones wait in
  the listen queue until one ends;
- accept() failing for want of descriptors or memory (the cap set too high, or descriptors
  used elsewhere) makes room and pauses the same way.

Pauses are short when connections are closing and back off when none can (`AcceptBackoff`),
with one log line per interval, not one per attempt.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from pathlib import Path

from agent.conditions import cgroup_memory_room_bytes, memory_bytes

DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
DEFAULT_IDLE_TIMEOUT_S = 60.0
# Descriptors the server keeps for itself below the limit: stdio, the event loop's epoll and
# self-pipe, listening sockets, the trial log, a site file being read, /proc reads, TLS files.
RESERVED_DESCRIPTORS = 32
# Where RLIMIT_NOFILE is unlimited the cap is still finite: each connection costs memory.
UNLIMITED_DESCRIPTORS_CAP = 65536
ACCEPT_LOG_INTERVAL_S = 10.0

# The memory a server's connections may take together: an eighth of what the node has
# available when the server starts (MemAvailable, or less where the process's memory cgroup
# leaves it less: an emulated node's limit), so a full server leaves a 1 GB Pi (about
# 800 MB available) most of its memory for the OS, the meter and the client, and never more
# than MAX_CONNECTION_BUDGET_BYTES: the testbed serves a few clients at a time, and a bigger
# node is no reason to let a flood grow the server the study measures.
CONNECTION_BUDGET_SHARE = 8
MAX_CONNECTION_BUDGET_BYTES = 128 * 2**20
# Where /proc/meminfo cannot be read: what a 1 GB Pi has available.
FALLBACK_AVAILABLE_BYTES = 800 * 10**6
# What one HTTP/2 connection held open adds to the server's RSS, measured on 2026-12-06 (x86-64,
# Python 3.11, 1,000 connections that sent their preface and SETTINGS, then nothing): 77 KiB in
# cleartext, 358 KiB over TLS, of which 256 KiB is the read buffer asyncio's SSL protocol
# allocates for every connection (asyncio.sslproto.SSLProtocol.max_size).
H2C_CONNECTION_BYTES = 80 * 2**10
H2_TLS_CONNECTION_BYTES = 360 * 2**10


def connection_budget_bytes(available_bytes: int | None = None, root: Path = Path("/")) -> int:
    """The memory the server's connections may take, from the node's available memory
    (default: MemAvailable under `root`, or what the process's memory cgroup leaves it where
    that is less)."""
    if available_bytes is None:
        try:
            available_bytes = memory_bytes(root).get("MemAvailable", FALLBACK_AVAILABLE_BYTES)
        except (OSError, ValueError):
            available_bytes = FALLBACK_AVAILABLE_BYTES
        room_bytes = cgroup_memory_room_bytes(root)
        if room_bytes is not None:
            available_bytes = min(available_bytes, room_bytes)
    return min(MAX_CONNECTION_BUDGET_BYTES, available_bytes // CONNECTION_BUDGET_SHARE)


def descriptor_cap(open_files_limit: int | None = None) -> int:
    """The cap below a descriptor limit (default: this process's soft RLIMIT_NOFILE)."""
    if open_files_limit is None:
        open_files_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if open_files_limit == resource.RLIM_INFINITY or open_files_limit < 0:
        return UNLIMITED_DESCRIPTORS_CAP
    return max(1, open_files_limit - min(RESERVED_DESCRIPTORS, open_files_limit // 2))


def default_max_connections(
    open_files_limit: int | None = None,
    budget_bytes: int | None = None,
    connection_bytes: int = H2_TLS_CONNECTION_BYTES,
) -> int:
    """The HTTP/2 server's default cap: below the descriptor limit (`descriptor_cap`) and
    within the memory budget (default: `connection_budget_bytes()`), each connection costing
    `connection_bytes`."""
    if budget_bytes is None:
        budget_bytes = connection_budget_bytes()
    return max(1, min(descriptor_cap(open_files_limit), budget_bytes // connection_bytes))


@dataclass(frozen=True)
class ConnectionLimits:
    handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = field(default_factory=default_max_connections)

    def __post_init__(self) -> None:
        # Programming errors: the command line checks what users give.
        if not self.handshake_timeout_s > 0 or not self.idle_timeout_s > 0:
            raise ValueError(f"timeouts must be positive: {self}")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1: {self}")

    def to_dict(self) -> dict[str, float | int]:
        return {
            "handshake_timeout_s": self.handshake_timeout_s,
            "idle_timeout_s": self.idle_timeout_s,
            "max_connections": self.max_connections,
        }


@dataclass
class IntervalTally:
    """Counts events and says when a line about them is due: the first event at once, then
    at most one line per `interval_s`, carrying what happened since the previous line."""

    interval_s: float
    # When the next line may be told. Kept as an instant rather than compared as a difference:
    # `(t + interval) - t` can round below the interval, which kept a count waiting past the
    # instant a caller computed as `t + interval` (and for ever, if nothing came later).
    _next_line_s: float | None = field(default=None, init=False)
    _counts: dict[str, int] = field(default_factory=dict, init=False)

    def note(self, now_s: float, **counts: int) -> dict[str, int] | None:
        for name, count in counts.items():
            self._counts[name] = self._counts.get(name, 0) + count
        if self._next_line_s is not None and now_s < self._next_line_s:
            return None
        self._next_line_s = now_s + self.interval_s
        due, self._counts = self._counts, {}
        return due


@dataclass
class AcceptBackoff:
    """How long accepting pauses when it cannot go on (the cap reached, or accept() failing
    for want of descriptors or memory), and the line to log about it: at most one per
    `log_interval_s`, counting the pauses since the previous one.

    When connections are closing to make room, their descriptors are free on the event loop's
    next turn, so accepting resumes after `min_delay_s`; when nothing could be closed (every
    connection is serving), the pause doubles up to `max_delay_s` and new connections wait in
    the listen queue, so a full server is not polled in a loop."""

    log_interval_s: float = ACCEPT_LOG_INTERVAL_S
    min_delay_s: float = 0.01
    max_delay_s: float = 1.0
    _delay_s: float = field(default=0.0, init=False)
    _log: IntervalTally = field(init=False)

    def __post_init__(self) -> None:
        self._log = IntervalTally(self.log_interval_s)

    def paused(
        self, now_s: float, reason: str, closing: int, sockets_in_use: int
    ) -> tuple[float, str | None]:
        """Accepting stops for `reason`; `closing` connections are closing to make room.
        Returns the pause before accepting again and the line to log, if one is due."""
        if closing:
            self._delay_s = self.min_delay_s
        else:
            self._delay_s = min(self.max_delay_s, max(self.min_delay_s, 2 * self._delay_s))
        due = self._log.note(now_s, pauses=1, closing=closing)
        line = None
        if due is not None:
            line = (
                f"{reason} with {sockets_in_use} sockets in use ({due['pauses']} pauses, "
                f"{due['closing']} idle connections closed to make room since the last such "
                f"line); accepting again in {self._delay_s * 1000:.0f} ms"
            )
        return self._delay_s, line

    def accepted(self) -> None:
        self._delay_s = 0.0
