"""Trial markers: a line the node raises for the duration of each page fetch, so the meter can cut
the trial's window out of its sample stream by edges instead of by mapped clocks.

- ``none`` (default): no marker.
- ``gpio:CHIP:LINE``: a GPIO line wired to the meter's marker input (libgpiod v2 bindings,
  the optional ``gpio`` extra).
- ``fifo:PATH``: a software line for local nodes: writes ``1`` / ``0`` lines to a FIFO (or file)
  that the virtual meter and the simavr harness read as rising and falling edges.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from agent.errors import MarkerError


class Marker(Protocol):
    def raise_line(self) -> None: ...
    def lower_line(self) -> None: ...
    def describe(self) -> str: ...
    def close(self) -> None: ...


class NoMarker:
    def raise_line(self) -> None:
        pass

    def lower_line(self) -> None:
        pass

    def describe(self) -> str:
        return "none"

    def close(self) -> None:
        pass


class FifoMarker:
    def __init__(self, path: str) -> None:
        self.path = path
        try:
            # Non-blocking open fails with ENXIO when nobody reads the FIFO: better a clear
            # error now than a fetch that blocks on its marker.
            self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_APPEND)
        except OSError as exc:
            raise MarkerError(
                f"--marker fifo:{path}: cannot open for writing: {exc.strerror}"
            ) from None

    def _write(self, level: bytes) -> None:
        try:
            os.write(self._fd, level)
        except BlockingIOError:
            raise MarkerError(f"--marker fifo:{self.path}: reader is not keeping up") from None

    def raise_line(self) -> None:
        self._write(b"1\n")

    def lower_line(self) -> None:
        self._write(b"0\n")

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

    def raise_line(self) -> None:
        self._request.set_value(self.line, self._gpiod.line.Value.ACTIVE)

    def lower_line(self) -> None:
        self._request.set_value(self.line, self._gpiod.line.Value.INACTIVE)

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
