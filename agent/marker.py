"""Trial markers: a line the node raises for the duration of each page fetch, so the meter can cut
the trial's window out of its sample stream by edges instead of by mapped clocks.

- ``none`` (default): no marker.
- ``gpio:CHIP:LINE``: a GPIO line wired to the meter's marker input (libgpiod v2 bindings,
  the optional ``gpio`` extra).
- ``fifo:PATH``: a software line for local nodes: writes ``LEVEL MONO_NS`` lines to a FIFO (or
  file), ``1`` rising and ``0`` falling, each with the CLOCK_MONOTONIC instant (ns) the line
  changed, which the modelled meters (virtual, simavr, emulated PPK2) place on their samples.
  The instant travels with the edge because a meter's thread on a busy machine may read the
  FIFO late: stamped at reading, a trial's edges moved by however long the thread waited.
  After each line the node waits until the meter has read it (the FIFO holds no unread byte),
  at most `READ_WAIT_S`: a modelled meter books the node's work between two of its readings
  evenly over them, and its reading at a late-read edge may then be booked up to the edge's
  instant, since the node did nothing between that instant and the reading (the virtual
  meter's `run`). Without the wait, a fetch started at once would be booked before its edge.
"""

from __future__ import annotations

import array
import fcntl
import os
import stat
import termios
import time
from typing import Any, Protocol

from agent.errors import MarkerError


class Marker(Protocol):
    """A line raised and lowered around each trial; each change returns its CLOCK_MONOTONIC
    instant (ns), the one the meter is told where the line carries it."""

    def raise_line(self) -> int: ...
    def lower_line(self) -> int: ...
    def describe(self) -> str: ...
    def close(self) -> None: ...


class NoMarker:
    def raise_line(self) -> int:
        return time.monotonic_ns()

    def lower_line(self) -> int:
        return time.monotonic_ns()

    def describe(self) -> str:
        return "none"

    def close(self) -> None:
        pass


# A bound on the wait for the meter to read an edge: a reader that stopped reading (a meter
# whose thread died with the FIFO still open) costs each edge this much, not the trial.
READ_WAIT_S = 2.0
_READ_POLL_S = 0.0002  # a few hundred polls in a read late by a scheduler slice: no CPU to speak of


class FifoMarker:
    def __init__(self, path: str, read_wait_s: float = READ_WAIT_S) -> None:
        self.path = path
        try:
            # Non-blocking open fails with ENXIO when nobody reads the FIFO: better a clear
            # error now than a fetch that blocks on its marker.
            self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_APPEND)
        except OSError as exc:
            raise MarkerError(
                f"--marker fifo:{path}: cannot open for writing: {exc.strerror}"
            ) from None
        # A regular file (a log of the edges) has no reader to wait for.
        self._read_wait_s = read_wait_s if stat.S_ISFIFO(os.fstat(self._fd).st_mode) else 0.0

    def _write(self, level: int) -> int:
        at_ns = time.monotonic_ns()
        try:
            os.write(self._fd, f"{level} {at_ns}\n".encode())
        except BlockingIOError:
            raise MarkerError(f"--marker fifo:{self.path}: reader is not keeping up") from None
        give_up_s = time.monotonic() + self._read_wait_s
        while self._unread_bytes() and time.monotonic() < give_up_s:
            time.sleep(_READ_POLL_S)
        return at_ns

    def _unread_bytes(self) -> int:
        count = array.array("i", [0])
        fcntl.ioctl(self._fd, termios.FIONREAD, count, True)
        return count[0]

    def raise_line(self) -> int:
        return self._write(1)

    def lower_line(self) -> int:
        return self._write(0)

    def describe(self) -> str:
        return f"fifo:{self.path}"

    def close(self) -> None:
        os.close(self._fd)


class GpioMarker:
    def __init__(self, chip: str, line: int) -> None:
        try:
            import gpiod  # noqa: PLC0415  (optional dependency, only on nodes that have GPIO)
        except ImportError:
            raise MarkerError(
                "--marker gpio: the gpiod module is not installed (pip install 'h2iot[gpio]')"
            ) from None
        self.chip = chip if chip.startswith("/dev/") else f"/dev/{chip}"
        self.line = line
        self._gpiod: Any = gpiod
        try:
            self._request: Any = gpiod.request_lines(
                self.chip,
                consumer="h2iot-marker",
                config={
                    line: gpiod.LineSettings(
                        direction=gpiod.line.Direction.OUTPUT,
                        output_value=gpiod.line.Value.INACTIVE,
                    )
                },
            )
        except (OSError, ValueError) as exc:
            raise MarkerError(f"--marker gpio:{chip}:{line}: {exc}") from None

    def raise_line(self) -> int:
        self._request.set_value(self.line, self._gpiod.line.Value.ACTIVE)
        return time.monotonic_ns()

    def lower_line(self) -> int:
        self._request.set_value(self.line, self._gpiod.line.Value.INACTIVE)
        return time.monotonic_ns()

    def describe(self) -> str:
        return f"gpio:{self.chip}:{self.line}"

    def close(self) -> None:
        self._request.release()


def open_marker(spec: str) -> Marker:
    """`none`, `gpio:CHIP:LINE` or `fifo:PATH` -> a marker; a bad spec is a MarkerError."""
    kind, _, rest = spec.partition(":")
    if kind == "none" and not rest:
        return NoMarker()
    if kind == "fifo" and rest:
        return FifoMarker(rest)
    if kind == "gpio":
        chip, _, line = rest.partition(":")
        if chip and line.isdigit():
            return GpioMarker(chip, int(line))
    raise MarkerError(f"--marker {spec!r}: expected none, gpio:CHIP:LINE or fifo:PATH")
