"""A thread that moves bytes from a serial port into the decoder, stamping each read.

Like pyserial's `serial.threaded.ReaderThread` it only moves bytes: everything it decodes goes
to one callback, `on_frames(frames, t_mono_ns)`, on this thread. To stay cheap at the highest
sample rates it waits for one byte, then lets `batch_s` (10 ms: about one frame of the
firmware's) worth of bytes accumulate before it reads them all: at most about 100 wake-ups
per second, under 2 % of a core at a full 500000-baud link (benchmarks/meter_decode.py).
`t_mono_ns` (`time.monotonic_ns`) is taken right after the read, so it bounds from above when
the frames' last bytes arrived; the earliest such bounds map sample indices to the clock.
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


class SerialReader(threading.Thread):
    def __init__(
        self,
        port: serial.Serial,
        decoder: FrameDecoder,
        on_frames: OnFrames,
        *,
        batch_s: float = 0.01,
    ) -> None:
        super().__init__(name=f"meter-reader {port.port}", daemon=True)
        self.port = port
        self.decoder = decoder
        self._on_frames = on_frames
        self._batch_s = batch_s
        self._stopping = threading.Event()
        self.bytes_read = 0
        self.reads = 0
        self.error: MeterError | None = None

    def run(self) -> None:
        port = self.port
        try:
            while not self._stopping.is_set():
                data = port.read(1)
                if not data:
                    continue
                if self._batch_s:
                    time.sleep(self._batch_s)
                waiting = port.in_waiting
                if waiting:
                    data += port.read(waiting)
                t_mono_ns = time.monotonic_ns()
                self.bytes_read += len(data)
                self.reads += 1
                frames = self.decoder.feed(data)
                if frames:
                    self._on_frames(frames, t_mono_ns)
        except (serial.SerialException, OSError) as exc:
            if not self._stopping.is_set():
                self.error = MeterError(f"meter on {port.port}: read failed: {exc}")

    def stop(self) -> None:
        self._stopping.set()
        if self.port.is_open:
            self.port.cancel_read()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
