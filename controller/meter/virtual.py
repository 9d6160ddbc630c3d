"""The virtual meter: a pseudo-terminal that speaks the board's wire protocol and commands, its
current from a power model driven by the CPU use of the watched nodes.

Analog input n follows the n-th watched source (a process tree or a cgroup); inputs with no
source model an idle board, or nothing at all with `no_load` (for calibrating the zero). Every
`tick_s` it measures the CPU used since the last tick, sets each input's power from the model,
and lets the device model take the samples due by then through an ACS712 and a 10-bit ADC.

Ground truth: with `truth_path` it writes CSV rows `start,first_sample_index,end_sample_index,
analog_input,power_mw`: samples first..end-1 (end excluded) of the `start`-th START (counted from
1) were taken at exactly `power_mw`. `controller.meter.truth` reads it.

Markers: with `marker_fifo` (created if missing) it reads lines `1` (rising edge) and `0`
(falling edge), as the agent's `--marker fifo:PATH` writes them, and sends a MARKER frame with
the index of the first sample at or after the edge. Other lines are ignored.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import time
import tty
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from controller.errors import ConfigError, MeterError
from controller.meter.cpu_load import CgroupCpu, ProcessTreeCpu, Utilisation
from controller.meter.device import BoardIdentity, DeviceCore
from controller.meter.power_model import PI_3B, PowerModel
from controller.meter.protocol import SampleArray
from controller.meter.sensor import Acs712

TRUTH_HEADER = "start,first_sample_index,end_sample_index,analog_input,power_mw\n"
_OUTPUT_CAP_BYTES = 1 << 20  # a host that stops reading loses the oldest bytes beyond this


@dataclass(frozen=True)
class WatchSpec:
    """What drives one analog input: `pid:N` (a process tree) or `cgroup:PATH`."""

    kind: str
    target: str

    @classmethod
    def parse(cls, text: str) -> WatchSpec:
        kind, sep, target = text.partition(":")
        if not sep and text.isdigit():
            return cls("pid", text)
        if kind == "pid" and target.isdigit():
            return cls("pid", target)
        if kind == "cgroup" and target:
            return cls("cgroup", target)
        raise ConfigError(f"--watch {text!r}: expected PID, pid:PID or cgroup:PATH")


@dataclass(frozen=True)
class VirtualMeterOptions:
    watch: tuple[WatchSpec, ...] = ()
    truth_path: Path | None = None
    marker_fifo: Path | None = None
    model: PowerModel = PI_3B
    sensor: Acs712 = field(default_factory=Acs712)
    no_load: bool = False
    tick_s: float = 0.01
    rescan_s: float = 0.25
    seed: int | None = None
    identity: BoardIdentity = field(default_factory=BoardIdentity)


class VirtualMeter:
    """Open it, hand `port` to a reader, then `run()` (blocking) or `start()` (a thread)."""

    def __init__(self, options: VirtualMeterOptions) -> None:
        self.options = options
        now = time.monotonic()
        self._loads = [
            Utilisation(_cpu_source(spec, options.rescan_s).cpu_seconds, options.model.cores, now)
            for spec in options.watch
        ]
        self._power_mw = [options.model.idle_mw] * 8
        self._rng = np.random.default_rng(options.seed)
        self._device = DeviceCore(self._sample, options.identity)
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line discipline before a host configures it
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        self._out = bytearray()
        self._starts = 0
        self._truth: IO[str] | None = None
        if options.truth_path is not None:
            self._truth = options.truth_path.open("w", encoding="ascii")
            self._truth.write(TRUTH_HEADER)
        self._fifo_fd, self._fifo_keepalive = _open_marker_fifo(options.marker_fifo)
        self._fifo_pending = b""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="virtual-meter", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Make `run()` return soon; safe from a signal handler."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        self.stop()
        for fd in (self._master, self._slave, self._fifo_fd, self._fifo_keepalive):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self._truth is not None:
            self._truth.close()

    def run(self) -> None:
        """Serve until `stop()`."""
        tick = self.options.tick_s
        next_tick = time.monotonic()
        while not self._stop.is_set():
            readers = [self._master] + ([self._fifo_fd] if self._fifo_fd >= 0 else [])
            writers = [self._master] if self._out else []
            timeout = max(0.0, min(next_tick - time.monotonic(), 0.1))
            readable, _, _ = select.select(readers, writers, [], timeout)
            now = time.monotonic()
            if self._master in readable:
                self._on_host_bytes(now)
            if self._fifo_fd in readable:
                self._on_marker_lines(now)
            if now >= next_tick:
                self._refresh(now)
                self._device.advance(now)
                next_tick = max(next_tick + tick, now)
                if self._truth is not None:
                    self._truth.flush()
            self._flush_output()

    # --- inputs -----------------------------------------------------------------------------

    def _on_host_bytes(self, now: float) -> None:
        try:
            data = os.read(self._master, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            raise MeterError(f"virtual meter {self.port}: read failed: {exc.strerror}") from None
        self._refresh(now)
        self._device.receive(data, now)

    def _on_marker_lines(self, now: float) -> None:
        try:
            data = os.read(self._fifo_fd, 4096)
        except BlockingIOError:
            return
        *lines, self._fifo_pending = (self._fifo_pending + data).split(b"\n")
        for line in lines:
            level = line.strip()
            if level in (b"0", b"1"):
                self._refresh(now)
                self._device.marker(int(level), now)

    def _refresh(self, now: float) -> None:
        """Power of every input over the time since the last refresh, before sampling it."""
        model = self.options.model
        for n, load in enumerate(self._loads):
            self._power_mw[n] = model.power_mw(load.update(now))

    # --- outputs ----------------------------------------------------------------------------

    def _sample(
        self, first_index: int, count: int, inputs: tuple[int, ...], oversampling: int
    ) -> SampleArray:
        if first_index == 0:
            self._starts += 1
        power = np.array(
            [0.0 if self.options.no_load else self._power_mw[n] for n in inputs], dtype=np.float64
        )
        if self._truth is not None:
            end = first_index + count
            self._truth.writelines(
                f"{self._starts},{first_index},{end},{n},{p:.6f}\n"
                for n, p in zip(inputs, power, strict=True)
            )
        return self.options.sensor.codes(
            np.broadcast_to(power, (count, len(inputs))), self._rng, oversampling
        )

    def _flush_output(self) -> None:
        self._out += self._device.output()
        if len(self._out) > _OUTPUT_CAP_BYTES:
            del self._out[: len(self._out) - _OUTPUT_CAP_BYTES]
        while self._out:
            try:
                written = os.write(self._master, self._out)
            except BlockingIOError:
                return
            del self._out[:written]


def _cpu_source(spec: WatchSpec, rescan_s: float) -> ProcessTreeCpu | CgroupCpu:
    if spec.kind == "pid":
        return ProcessTreeCpu(int(spec.target), rescan_s)
    return CgroupCpu(Path(spec.target))


def _open_marker_fifo(path: Path | None) -> tuple[int, int]:
    """(read fd, keep-alive write fd): the writer we hold keeps the FIFO from reporting EOF
    every time the node closes its end."""
    if path is None:
        return -1, -1
    if not path.exists():
        os.mkfifo(path)
    elif not stat.S_ISFIFO(path.stat().st_mode):
        raise ConfigError(f"--marker-fifo {path}: exists and is not a FIFO")
    try:
        read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        keepalive = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"--marker-fifo {path}: cannot open: {exc.strerror}") from None
    return read_fd, keepalive
