"""A thread that moves bytes from a serial port into the decoder, stamping each read.

Like pyserial's `serial.threaded.ReaderThread` it only moves bytes: everything it decodes goes
to one callback, `on_frames(frames, t_mono_ns)`, on this thread. To stay cheap at the highest
sample rates it waits for one byte, then lets `batch_s` (10 ms: about one frame of the
firmware's) worth of bytes accumulate before it reads them all: at most about 100 wake-ups
per second, under 2 % of a core at a full 500000-baud link (benchmarks/meter_decode.py).
`t_mono_ns` (`time.monotonic_ns`) is taken right after the read, so it bounds from above when
the frames' last bytes arrived; the earliest such bounds map sample indices to the clock.

The thread never ends silently: as `ReaderThread` hands its end to `connection_lost(exc)`,
it calls `on_lost(error)` once when it stops, with None after `stop()` and otherwise a
`MeterReadError` saying why (the port failed, or the decoder or `on_frames` raised: the
exception is its `cause`); the `error` attribute holds the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import serial

from controller.errors import MeterError
from controller.meter.decoder import FrameDecoder
from controller.meter.protocol import Frame

OnFrames = Callable[[list[Frame], int], None]


class MeterReadError(MeterError):
    """Reading the meter stopped: the port failed, or what handles the bytes raised (`cause`)."""

    def __init__(self, port: str, what: str, cause: BaseException) -> None:
        super().__init__(f"meter on {port}: {what}")
        self.port = port
        self.cause = cause
        self.__cause__ = cause  # its traceback goes with it to whoever raises this


OnLost = Callable[[MeterReadError | None], None]


class SerialReader(threading.Thread):
    def __init__(
        self,
        port: serial.Serial,
        decoder: FrameDecoder,
        on_frames: OnFrames,
        *,
        on_lost: OnLost | None = None,
        batch_s: float = 0.01,
    ) -> None:
        super().__init__(name=f"meter-reader {port.port}", daemon=True)
        self.port = port
        self.decoder = decoder
        self._on_frames = on_frames
        self._on_lost = on_lost
        self._batch_s = batch_s
        self._stopping = threading.Event()
        self.bytes_read = 0
        self.reads = 0
        self.error: MeterReadError | None = None

    def run(self) -> None:
        error: MeterReadError | None = None
        while not self._stopping.is_set():
            try:
                data, t_mono_ns = self._read()
            except (serial.SerialException, OSError) as exc:
                if not self._stopping.is_set():
                    error = MeterReadError(str(self.port.port), f"read failed: {exc}", exc)
                break
            if not data:
                continue
            try:
                frames = self.decoder.feed(data)
                if frames:
                    self._on_frames(frames, t_mono_ns)
            except Exception as exc:  # a bug, not the port: still the owner's to hear about
                what = f"decoding or handling its frames failed: {type(exc).__name__}: {exc}"
                error = MeterReadError(str(self.port.port), what, exc)
                break
        self.error = error
        if self._on_lost is not None:
            self._on_lost(error)

    def _read(self) -> tuple[bytes, int]:
        """The bytes that have arrived (waiting for one first), and when they were read."""
        port = self.port
        data = port.read(1)
        if not data:
            return data, 0
        if self._batch_s:
            time.sleep(self._batch_s)
        waiting = port.in_waiting
        if waiting:
            data += port.read(waiting)
        t_mono_ns = time.monotonic_ns()
        self.bytes_read += len(data)
        self.reads += 1
        return data, t_mono_ns

    def stop(self) -> None:
        self._stopping.set()
        if self.port.is_open:
            self.port.cancel_read()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
