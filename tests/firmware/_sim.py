"""Drives firmware/build-sim/h2iot_sim in --fast (lockstep) mode: simulated time advances only
as far as the times this driver writes to its stdin, so tests are deterministic."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import tty
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from tests.firmware import _wire

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"
HARNESS = FIRMWARE / "build-sim" / "h2iot_sim"
ELF = FIRMWARE / "build-mega2560" / "h2iot_meter.elf"
MS = 1_000_000


class Simulator:
    def __init__(self, elf: Path = ELF, *options: str) -> None:
        self.proc = subprocess.Popen(
            [str(HARNESS), "--fast", *options, str(elf)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.pts = self.proc.stdout.readline().strip()
        assert self.pts.startswith("/dev/pts/"), self.pts
        self.fd = os.open(self.pts, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)
        self.now_ns = 0
        self.frames: list[_wire.Frame] = []
        self.clock_lines: list[str] = []
        self.stderr = ""
        self._reader = _wire.FrameReader()
        self._lock = threading.Lock()
        self._seq = 0
        self._threads = [
            threading.Thread(target=self._read_pty, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read_pty(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            frames = self._reader.feed(data)
            with self._lock:
                self.frames.extend(frames)

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.clock_lines.append(line.strip())

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.stderr += line

    # ---- input side ----

    def write_lines(self, lines: Iterable[str]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.writelines(lines)
        self.proc.stdin.flush()

    def advance(self, to_ns: int) -> None:
        self.now_ns = max(self.now_ns, to_ns)
        self.write_lines([f"{self.now_ns}\n"])

    def advance_until(
        self, done: Callable[[], bool], step_ns: int = MS, timeout_s: float = 30.0
    ) -> None:
        """Steps simulated time until done() holds (the pty needs wall time to carry bytes)."""
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"simulator: timed out at {self.now_ns} ns")
            self.advance(self.now_ns + step_ns)
            time.sleep(0.002)

    def wait_until(self, done: Callable[[], bool], timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"simulator: gave up waiting; stderr: {self.stderr_tail()}")
            time.sleep(0.01)

    # ---- protocol helpers ----

    def snapshot(self) -> list[_wire.Frame]:
        with self._lock:
            return list(self.frames)

    def command(self, command_type: int, payload: bytes = b"") -> int:
        """Sends one command, steps time until its ACK arrives and returns the ACK's result."""
        seq = self._seq
        self._seq += 1
        start = len(self.snapshot())
        os.write(self.fd, _wire.encode_frame(command_type, seq, payload))
        result: list[int] = []

        def acked() -> bool:
            for f in self.snapshot()[start:]:
                if f.frame_type == _wire.ACK and _wire.ack(f)[:2] == (command_type, seq):
                    result.append(_wire.ack(f)[2])
                    return True
            return False

        self.advance_until(acked)
        return result[0]

    def first_after(self, start: int, frame_type: int) -> _wire.Frame:
        """The first frame of a type at or after position `start`, stepping time until it comes."""
        found: list[_wire.Frame] = []

        def arrived() -> bool:
            found.extend(f for f in self.snapshot()[start:] if f.frame_type == frame_type)
            return bool(found)

        self.advance_until(arrived)
        return found[0]

    def clock(self, timeout_s: float = 30.0) -> tuple[int, int]:
        """The last `clock T0 PERIOD` line, stepping time until one appears."""

        def started() -> bool:
            with self._lock:
                return any(line.startswith("clock ") for line in self.clock_lines)

        self.advance_until(started, timeout_s=timeout_s)
        with self._lock:
            line = [x for x in self.clock_lines if x.startswith("clock ")][-1]
        _, t0, period = line.split()
        return int(t0), int(period)

    def stderr_tail(self) -> str:
        with self._lock:
            return self.stderr[-2000:]

    def close(self) -> str:
        """Ends the simulator (end of input) and returns its stderr."""
        if self.fd < 0:
            return self.stderr_tail()
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for thread in self._threads[1:]:
            thread.join(timeout=5)
        os.close(self.fd)
        self.fd = -1
        return self.stderr_tail()

    def __enter__(self) -> Simulator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
