"""The nghttp2 engine's server traces: one long-lived program (nghttpd, or gtlsserver over
HTTP/3) serves every trial, so its trace is cut per trial by connection (agent/README.md, Event
traces): the connections that began while the trial was open (its client opens its own), each
waited for until it has closed, then written as `<trial_id>.server.sqlog` before the trial's
record.

- nghttpd runs with `-v`; its frame log (each line of a connection prefixed `[id=N]`) is cut by
  agent.engines.nghttp2.frame_log.ServerFrameLog and converted to our HTTP/2 frame events.
- gtlsserver runs with `--qlog-dir` (a private directory): ngtcp2 writes one qlog file per
  connection, buffered, and whole once gtlsserver closes it (after the connection's draining
  period); the trial's is the file that appeared while it was open, kept as ngtcp2 wrote it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agent import qlog
from agent.engines.nghttp2.frame_log import ServerFrameLog
from agent.errors import UsageError
from agent.event_trace import TraceWriter, trace_name, write_durably

log = logging.getLogger("h2iot.nghttpd")

SETTLE_S = 5.0
"""How long a trial's end waits for its connections to close (nghttpd closes at the client's
GOAWAY, gtlsserver after a draining period of three PTOs); past it the trace is what there is."""
_POLL_S = 0.01


class ServerTraces(Protocol):
    """What the supervisor (agent.engines.nghttp2.server) asks of a program's traces."""

    def started(self, pid: int, wall_ns: int) -> None:
        """The program runs as `pid`, started at `wall_ns` (its clock's zero)."""

    def feed(self, line: str) -> bool:
        """A line of its output; whether the trace took it (else it is shown)."""

    def output_bytes(self) -> int:
        """What the program has written of its traces so far (its write(2) total counts it,
        its socket did not send it)."""

    def begin(self) -> None:
        """A trial opens: the connections that begin from now are its."""

    async def finish(self, trial_id: str) -> None:
        """The trial's client is done: its connections, once closed, are its trace."""

    def abandon(self) -> None:
        """The trial ends without a record: its trace is dropped."""

    def close(self) -> None:
        """The program has stopped."""


def _report(trial_id: str, problem: str) -> None:
    print(
        json.dumps({"event": "trace_not_written", "trial_id": trial_id, "error": problem}),
        file=sys.stderr,
        flush=True,
    )


async def _settle(done: Callable[[], bool]) -> bool:
    """Whether `done()` came true within SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S
    while not done():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_POLL_S)
    return True


class NghttpdTraces:
    """nghttpd -v's frame log, a trial's connections as its trace."""

    def __init__(self, writer: TraceWriter) -> None:
        self._writer = writer
        self._log = ServerFrameLog()
        self._start_wall_ns = 0
        self._output_bytes = 0  # every line nghttpd printed, with its newline

    def started(self, pid: int, wall_ns: int) -> None:
        self._start_wall_ns = wall_ns

    def feed(self, line: str) -> bool:
        # Read off the pipe once nghttpd went idle, so counted by the time it is sampled.
        self._output_bytes += len(line.encode()) + 1
        return self._log.feed(line)

    def output_bytes(self) -> int:
        return self._output_bytes

    def begin(self) -> None:
        self._log.begin()

    async def finish(self, trial_id: str) -> None:
        self._log.end()
        if not await _settle(lambda: self._log.settled):
            log.warning("trial %s: nghttpd had not closed its connection; trace so far", trial_id)
        events = self._log.take()
        # nghttpd's times count from its start (a little after the process's); the trace's
        # reference is the trial's first frame.
        first_ns = events[0].time_ns if events else 0
        self._writer.write_qlog(
            trial_id, [event.qlog(first_ns) for event in events], self._start_wall_ns + first_ns
        )

    def abandon(self) -> None:
        self._log.end()
        self._log.take()

    def close(self) -> None:
        """Nothing held."""


class GtlsServerTraces:
    """gtlsserver's own qlog, a file per connection in a private directory (`directory`), the
    trial's as its trace."""

    def __init__(self, writer: TraceWriter) -> None:
        self._writer = writer
        self.directory = Path(tempfile.mkdtemp(prefix="h2iot-gtlsserver-qlog-"))
        self._pid: int | None = None
        self._before: set[Path] = set()
        self._removed_bytes = 0  # the sizes of the files removed

    def started(self, pid: int, wall_ns: int) -> None:
        self._pid = pid

    def feed(self, line: str) -> bool:
        return False

    def output_bytes(self) -> int:
        """The files' sizes: what ngtcp2 has written of them (it buffers, so not all it
        logged), those removed included."""
        held = 0
        for path in self.directory.iterdir():
            with contextlib.suppress(FileNotFoundError):
                held += path.stat().st_size
        return self._removed_bytes + held

    def _open_files(self) -> set[Path]:
        """The qlog files gtlsserver holds open (its connections not yet freed)."""
        fds = Path(f"/proc/{self._pid}/fd")
        held = set()
        try:
            for fd in fds.iterdir():
                try:
                    target = Path(os.readlink(fd))
                except OSError:
                    continue  # closed since listed
                if target.parent == self.directory:
                    held.add(target)
        except OSError:
            return set()  # gtlsserver is gone: it holds nothing
        return held

    def begin(self) -> None:
        # Files of connections outside any trial, closed since: no trial's.
        held = self._open_files()
        for path in self.directory.iterdir():
            if path not in held:
                self._remove(path)
        self._before = set(self.directory.iterdir())

    async def finish(self, trial_id: str) -> None:
        new = sorted(
            set(self.directory.iterdir()) - self._before, key=lambda path: path.stat().st_mtime
        )
        if not await _settle(lambda: not set(new) & self._open_files()):
            log.warning(
                "trial %s: gtlsserver had not closed its connection; trace so far", trial_id
            )
        if not new:
            _report(trial_id, "gtlsserver wrote no qlog while the trial was open")
            return
        if len(new) > 1:
            log.warning("trial %s: %d connections; the first one's qlog kept", trial_id, len(new))
        try:
            data = new[0].read_bytes()
            write_durably(
                self._writer.directory / trace_name(trial_id, "server"),
                qlog.cut(data, self._writer.max_bytes),
            )
        except (OSError, UsageError) as exc:
            _report(trial_id, str(exc))
        for path in new:
            self._remove(path)

    def _remove(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._removed_bytes += path.stat().st_size
            path.unlink()

    def abandon(self) -> None:
        """Its files go at the next trial's begin, once closed."""

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
