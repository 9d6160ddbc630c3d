"""The emulated PPK2 on a real pseudo-terminal: the only I/O of this package.

`Ppk2Emulator(source)` opens a pty (raw mode), and a thread moves bytes between its master
side and a `Ppk2Device`: what a client writes to the slave path (`port`) becomes commands,
and while the device is started the thread takes samples at 100 kS/s by the monotonic clock,
asking `source(t_s)` for the current (uA) and logic byte of each instant, t_s in seconds since
the last start command. Pieces of a split metadata reply are written `split_gap_s` apart.

The pty holds what the client has not read. When more than `backlog_limit_bytes` wait, the
thread stops taking samples and lets the instants pass unsent (`Ppk2Device.lose`), so the
counter jumps as on a real PPK2 whose host reads too slowly; `overflow_samples` counts them.
A failure in the thread (a command the model refuses, an OSError) ends it, closes the master
side (the client's next read fails) and is kept in `failure`; leaving the `with` block without
another exception raises it as `Ppk2Error`.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import select
import threading
import time
import tty
from collections.abc import Callable, Iterator
from types import TracebackType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ
from controller.meter.ppk2.device import Command, Ppk2Device
from controller.meter.ppk2.metadata import Ppk2Error

Ppk2Source = Callable[[NDArray[np.float64]], tuple[ArrayLike, ArrayLike]]


def constant_source(current_ua: float, logic: int = 0) -> Ppk2Source:
    """A source of one current and one logic byte at every instant."""

    def source(t_s: NDArray[np.float64]) -> tuple[ArrayLike, ArrayLike]:
        return np.full(t_s.size, current_ua), logic

    return source


class Ppk2Emulator:
    """A PPK2 a serial client opens at `port`; use it as a context manager."""

    def __init__(
        self,
        source: Ppk2Source,
        device: Ppk2Device | None = None,
        *,
        split_gap_s: float = 0.15,
        backlog_limit_bytes: int = 1 << 20,
        tick_s: float = 0.001,
    ) -> None:
        self._source = source
        self._device = device or Ppk2Device()
        self._split_gap_s = split_gap_s
        self._backlog_limit = backlog_limit_bytes
        self._tick_s = tick_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._master = -1
        self._slave = -1
        self._port = ""
        self._failure: BaseException | None = None
        self._overflow = 0
        self._queued: collections.deque[tuple[float, bytes]] = collections.deque()
        self._unwritten = bytearray()

    @property
    def port(self) -> str:
        return self._port

    @property
    def device(self) -> Ppk2Device:
        """The model (read it under `locked()` while the thread runs)."""
        return self._device

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    @property
    def overflow_samples(self) -> int:
        return self._overflow

    def commands(self) -> tuple[Command, ...]:
        with self._lock:
            return self._device.commands

    @contextlib.contextmanager
    def locked(self) -> Iterator[Ppk2Device]:
        with self._lock:
            yield self._device

    def start(self) -> None:
        self._master, self._slave = os.openpty()
        # Raw: no echo, no CR/NL translation (0x0D is a command), no XON/XOFF (0x11 is one).
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        self._port = os.ttyname(self._slave)
        self._thread = threading.Thread(target=self._run, name=f"ppk2-emulator {self._port}")
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._close_master()
        if self._slave >= 0:
            os.close(self._slave)
            self._slave = -1

    def __enter__(self) -> Ppk2Emulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc_type is None and self._failure is not None:
            raise Ppk2Error(
                f"PPK2 emulator on {self._port} failed: {self._failure}"
            ) from self._failure

    def _close_master(self) -> None:
        if self._master >= 0:
            os.close(self._master)
            self._master = -1

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # kept for the owner: a thread never dies silently
            self._failure = exc
            self._close_master()

    def _loop(self) -> None:
        clock_start = 0.0
        taken = 0
        starts = -1
        while not self._stop.is_set():
            readable, _, _ = select.select([self._master], [], [], self._tick_s)
            if readable:
                data = self._read()
                if data:
                    with self._lock:
                        self._device.receive(data)
            now = time.monotonic()
            with self._lock:
                device = self._device
                if device.running:
                    if device.starts != starts:
                        starts, clock_start, taken = device.starts, now, 0
                    due = int((now - clock_start) * SAMPLE_RATE_HZ) - taken
                    if due > 0:
                        self._take(device, taken, due)
                        taken += due
                pieces = device.data_to_send()
            for k, piece in enumerate(pieces):
                self._queued.append((now + k * self._split_gap_s, piece))
            self._write(now)

    def _take(self, device: Ppk2Device, taken: int, due: int) -> None:
        if len(self._unwritten) + sum(len(p) for _, p in self._queued) > self._backlog_limit:
            device.lose(due)
            self._overflow += due
            return
        t_s = (taken + np.arange(due, dtype=np.float64)) / SAMPLE_RATE_HZ
        current_ua, logic = self._source(t_s)
        device.samples(due, current_ua, logic)

    def _read(self) -> bytes:
        try:
            return os.read(self._master, 4096)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno == errno.EIO:  # no client has the slave open: nothing to read
                return b""
            raise

    def _write(self, now: float) -> None:
        # A later piece may not overtake an earlier one still waiting for its time.
        while self._queued and self._queued[0][0] <= now:
            self._unwritten += self._queued.popleft()[1]
        while self._unwritten:
            try:
                written = os.write(self._master, self._unwritten[:65536])
            except BlockingIOError:
                return
            del self._unwritten[:written]
