"""What the modelled meters (virtual, simulated) share: the nodes' modelled power per analog
input, the ground-truth file, and the software marker line.

Analog input n follows the n-th watched source (a process tree or a cgroup, for its CPU time,
`cpu_load`; and a network interface, for its traffic, `net_load`); inputs with no source model
an idle board, or nothing at all with `no_load` (for calibrating the zero). At each refresh an
input's power is the model (`power_model`) applied to what its node did since the previous
refresh, and the samples taken up to that moment carry it.

Ground truth: CSV rows `start,first_sample_index,end_sample_index,analog_input,power_mw`:
samples first..end-1 (end excluded) of the `start`-th START (counted from 1) were taken at
exactly `power_mw`. `analysis.truth` reads it (and checks each trial against it).

Marker FIFO (created if missing): lines `LEVEL MONO_NS`, `1` a rising and `0` a falling edge at
that CLOCK_MONOTONIC instant, as the agent's `--marker fifo:PATH` writes them; a bare `1` or `0`
(a hand-written line) is an edge at the moment it is read; other lines are ignored.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
import numpy.typing as npt

from analysis.truth import EDGES_HEADER, TRUTH_HEADER
from controller.errors import ConfigError
from controller.meter.cpu_load import CgroupCpu, ProcessTreeCpu, Utilisation
from controller.meter.net_load import Counters, InterfaceCounters, Traffic
from controller.meter.power_model import PI_3B, PowerModel
from controller.meter.sensor import Acs712

ANALOG_INPUTS = 8


@dataclass(frozen=True)
class WatchSpec:
    """What drives one analog input: `pid:N` (a process tree) or `cgroup:PATH`.

    `core_fraction` is how much of one of this machine's cores one modelled core is worth: an
    emulated device throttled to that share (`controller.device`) that keeps its quota busy
    reads as a busy board, not as a mostly idle one. `cores` caps how many modelled cores it
    keeps busy (None: the model's all): an emulated one-core device whose quota lets it burst
    at the start of a period does that work at one core's rate, as the real core would.
    `interface` is the node's network interface whose traffic the model's network term
    follows, as seen from process `interface_pid`'s network namespace (this process's when
    None); None: no network term for this input."""

    kind: str
    target: str
    core_fraction: float = 1.0
    cores: int | None = None
    interface: str | None = None
    interface_pid: int | None = None

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
class ModelledMeterOptions:
    """What the virtual and the simulated meter share: sources, model, sensor, outputs."""

    watch: tuple[WatchSpec, ...] = ()
    truth_path: Path | None = None
    edges_path: Path | None = None  # the marker edges with the inputs' traffic (EdgeLog)
    marker_fifo: Path | None = None
    model: PowerModel = PI_3B
    sensor: Acs712 = field(default_factory=Acs712)
    no_load: bool = False
    tick_s: float = 0.01
    seed: int | None = None


class NodePower:
    """Modelled power per analog input, refreshed from the CPU used since the last refresh."""

    def __init__(
        self,
        watch: tuple[WatchSpec, ...],
        model: PowerModel,
        now_s: float,
        *,
        no_load: bool = False,
    ) -> None:
        if len(watch) > ANALOG_INPUTS:
            raise ConfigError(f"--watch: {len(watch)} sources for {ANALOG_INPUTS} inputs")
        self._model = model
        self._loads = [
            Utilisation(_modelled_cpu_seconds(spec), model.cores, now_s, spec.cores)
            for spec in watch
        ]
        self._traffic = [_traffic(spec, model, now_s) for spec in watch]
        idle = 0.0 if no_load else model.idle_mw
        self._power_mw = np.full(ANALOG_INPUTS, idle)
        self._no_load = no_load

    def refresh(self, now_s: float) -> None:
        for n, (load, traffic) in enumerate(zip(self._loads, self._traffic, strict=True)):
            utilisation = load.update(now_s)
            bytes_per_s, packets_per_s = traffic.update(now_s) if traffic else (0.0, 0.0)
            if not self._no_load:
                self._power_mw[n] = self._model.power_mw(utilisation, bytes_per_s, packets_per_s)

    def traffic(self, analog_input: int) -> Counters | None:
        """The input's interface counters as of the latest refresh (None without a network
        term)."""
        if analog_input >= len(self._traffic):
            return None
        traffic = self._traffic[analog_input]
        return None if traffic is None else traffic.last

    def power_mw(self, inputs: tuple[int, ...] | None = None) -> npt.NDArray[np.float64]:
        """Current power of the given inputs (default: all eight)."""
        if inputs is None:
            return self._power_mw.copy()
        return self._power_mw[list(inputs)]


def _csv(path: Path | None, header: str, option: str = "") -> IO[str] | None:
    """A new CSV file with its header line (None for no path)."""
    if path is None:
        return None
    try:
        handle = path.open("w", encoding="ascii")
    except OSError as exc:
        raise ConfigError(f"{option}{path}: cannot write: {exc.strerror}") from None
    handle.write(header)
    return handle


class TruthWriter:
    """The ground-truth file. It is a by-product of the measurement: a write that fails (a full
    disk) ends the file on its last whole line, is kept in `error`, and the meter goes on, so
    what the run records decides what the full disk means (controller.run)."""

    def __init__(self, path: Path | None) -> None:
        self._fd = -1
        self._pending: list[str] = []
        self.error: OSError | None = None
        self.starts = 0
        if path is not None:
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            except OSError as exc:
                raise ConfigError(f"--truth {path}: cannot write: {exc.strerror}") from None
            self._pending.append(TRUTH_HEADER)

    def new_start(self) -> None:
        self.starts += 1

    def segment(
        self, first: int, end: int, inputs: tuple[int, ...], power_mw: npt.NDArray[np.float64]
    ) -> None:
        if self._fd >= 0 and end > first:
            self._pending.extend(
                f"{self.starts},{first},{end},{n},{p:.6f}\n"
                for n, p in zip(inputs, power_mw, strict=True)
            )

    def flush(self) -> None:
        if self._fd < 0 or not self._pending:
            return
        data = memoryview("".join(self._pending).encode("ascii"))
        self._pending.clear()
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as exc:
            self.error = exc
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, end)  # the file ends on a whole line
            self.close()

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class EdgeLog:
    """The modelled meter's side file of marker edges (`EDGES_HEADER`, analysis.truth): for each
    edge, the sample index it was stamped with and the watched inputs' interface counters at
    that moment, so a trial's own traffic can be read between its two edges."""

    def __init__(self, path: Path | None) -> None:
        self._file = _csv(path, EDGES_HEADER)

    def edge(self, start: int, index: int, level: int, power: NodePower, inputs: int) -> None:
        if self._file is None:
            return
        for n in range(inputs):
            counters = power.traffic(n)
            if counters is not None:
                self._file.write(
                    f"{start},{index},{level},{n},{counters.bytes},{counters.packets}\n"
                )
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


@dataclass(frozen=True)
class MarkerEdge:
    """A marker line's change: its level (1 rising, 0 falling) and when it changed (monotonic
    s: the node's own stamp, or when the line was read where the node gave none)."""

    level: int
    at_s: float


def _edge(line: bytes, read_s: float) -> MarkerEdge | None:
    words = line.split()
    if not words or words[0] not in (b"0", b"1") or len(words) > 2:
        return None
    if len(words) == 1:
        return MarkerEdge(int(words[0]), read_s)
    if not words[1].isdigit():
        return None
    # Never after the read: a stamp from another clock would put the edge in the future.
    return MarkerEdge(int(words[0]), min(int(words[1]) / 1e9, read_s))


class MarkerFifo:
    """Reads edges from a FIFO; holds a writer of its own so the node's closing it is no EOF."""

    def __init__(self, path: Path | None) -> None:
        self.fd = -1
        self._keepalive = -1
        self._pending = b""
        if path is None:
            return
        if not path.exists():
            os.mkfifo(path)
        elif not stat.S_ISFIFO(path.stat().st_mode):
            raise ConfigError(f"--marker-fifo {path}: exists and is not a FIFO")
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            self._keepalive = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise ConfigError(f"--marker-fifo {path}: cannot open: {exc.strerror}") from None

    def edges(self, read_s: float) -> list[MarkerEdge]:
        """The edges of the complete lines readable now, `read_s` (monotonic s) being now."""
        if self.fd < 0:
            return []
        try:
            data = os.read(self.fd, 4096)
        except BlockingIOError:
            return []
        *lines, self._pending = (self._pending + data).split(b"\n")
        return [edge for line in lines if (edge := _edge(line, read_s)) is not None]

    def close(self) -> None:
        for fd in (self.fd, self._keepalive):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self._keepalive = -1


def _traffic(spec: WatchSpec, model: PowerModel, now_s: float) -> Traffic | None:
    """The input's network traffic, when it has an interface and the model a network term."""
    if spec.interface is None or (model.network_nj_per_byte == model.network_nj_per_packet == 0):
        return None
    return Traffic(InterfaceCounters(spec.interface, spec.interface_pid).read, now_s)


def _modelled_cpu_seconds(spec: WatchSpec) -> Callable[[], float]:
    """The source's CPU seconds counted in modelled-core seconds."""
    source = (
        ProcessTreeCpu(int(spec.target)) if spec.kind == "pid" else CgroupCpu(Path(spec.target))
    )
    if spec.core_fraction == 1.0:
        return source.cpu_seconds
    return lambda: source.cpu_seconds() / spec.core_fraction
