"""Firmware in the loop: the real meter firmware in simavr (firmware/sim/h2iot_sim), its ADC
inputs fed from the same node power model as the virtual meter.

The harness runs in lockstep (`--fast`): simulated time advances only as far as the times we
write to its stdin. Every `tick_s` this driver measures the nodes' CPU use, then writes one input
line per sample the firmware will take up to the current wall-clock time (with fresh sensor
noise each), then moves the simulator's horizon to that time. So simulated time follows wall
time, each sample reads the power of the moment it was taken, and the controller reads the
harness's pty exactly like a board's. The harness reports its sample clock (`clock T0 PERIOD`)
on stdout once sampling runs; until then inputs change once per tick.

INA219 channels (protocol 2): with `ina219_sources`, the harness puts an INA219 part at 0x40 + n
on the I2C bus for each source n and gets its analog inputs (shunt microvolts with the chip's
input noise, bus millivolts with the supply's droop, from `ina219.Ina219Model`) beside the
ADC's, at the same sample ticks; the part quantises them as the chip does. With
`ina226_sources` an INA226 part (firmware/sim/ina226_part.c: timed, averaged conversions) sits
at 0x40 + n instead, and its inputs keep four decimals (it resolves 2.5 uV and 1.25 mV); its
supply and shunt are the INA219 model's unless `ina226` is given.

simavr converts millivolts with 1023 / 5000 where the ATmega's datasheet says 1024 / ref; inputs
are scaled by 1024 / 1023 so the simulated ADC reads what a real one would.
"""

from __future__ import annotations

import bisect
import contextlib
import queue
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from controller.errors import MeterError
from controller.meter.driver import DriverThread
from controller.meter.ina219 import Ina219Model
from controller.meter.ina226 import Ina226Model, model_like
from controller.meter.node_power import (
    MarkerEdge,
    MarkerFifo,
    ModelledMeterOptions,
    NodePower,
    TruthWriter,
)
from controller.paths import FIRMWARE_DIR

HARNESS = Path("build-sim") / "h2iot_sim"
ELF = Path("build-mega2560") / "h2iot_meter.elf"
_SIMAVR_SCALE = 1024 / 1023
_BOOT_NS = 20_000_000  # the firmware has configured its pins by then
_BOOT_WALL_S = 0.05  # wall time for the simulator to get there (it runs 3-12x real time)
_NS = 1_000_000_000
_HISTORY_TICKS = 500  # per-tick inputs kept for the samples taken before the clock report


def with_edges(
    lines: list[str], edges: list[MarkerEdge], launch_ns: int, start_ns: int, end_ns: int
) -> list[str]:
    """A tick's harness input `lines` (times start_ns..end_ns, in order) with a `T m LEVEL`
    line per marker edge at the simulator's time of the instant the node changed the line.
    The harness's times never go back, so an edge before `start_ns` (what it was already
    given) goes at `start_ns`, the earliest it still accepts."""
    out = list(lines)
    for edge in edges:
        at_ns = min(max(round(edge.at_s * _NS) - launch_ns, start_ns), end_ns)
        times = [int(line.split(" ", 1)[0]) for line in out]
        out.insert(bisect.bisect_right(times, at_ns), f"{at_ns} m {edge.level}\n")
    return out


@dataclass(frozen=True)
class SimulateOptions(ModelledMeterOptions):
    firmware_dir: Path = FIRMWARE_DIR
    ina219_sources: tuple[int, ...] = ()  # an INA219 at 0x40 + n follows source n
    ina219: Ina219Model = field(default_factory=Ina219Model)
    ina226_sources: tuple[int, ...] = ()  # an INA226 at 0x40 + n follows source n
    ina226: Ina226Model | None = None  # None: the INA219 model's supply and shunt


@dataclass
class _Clock:
    t0_ns: int
    period_ns: int
    next_index: int = 0  # the first sample whose input is not written yet


def build_harness(firmware_dir: Path) -> tuple[Path, Path]:
    """`make sim` (incremental): the harness and the Mega 2560 firmware ELF."""
    try:
        result = subprocess.run(
            ["make", "-s", "-C", str(firmware_dir), "sim"],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MeterError(f"building the simulator in {firmware_dir} failed: {exc}") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
        raise MeterError(f"building the simulator in {firmware_dir} failed: {lines[-1]}")
    return firmware_dir / HARNESS, firmware_dir / ELF


class SimulatedMeter:
    """Starts the harness; `port` is its UART0 pty. `run()` feeds it until `request_stop()`."""

    def __init__(self, options: SimulateOptions) -> None:
        self.options = options
        harness, elf = build_harness(options.firmware_dir)
        self._power = NodePower(
            options.watch,
            options.model,
            time.monotonic(),
            no_load=options.no_load,
        )
        self._inputs = tuple(range(max(2, len(options.watch))))
        self._rng = np.random.default_rng(options.seed)
        self._truth = TruthWriter(options.truth_path)
        self._marker = MarkerFifo(options.marker_fifo)
        self._events: queue.Queue[tuple[str, int, int]] = queue.Queue()
        self._stderr: list[str] = []
        self._stop = threading.Event()
        self._driver: DriverThread | None = None
        self._exit_error: MeterError | None = None
        self._proc = subprocess.Popen(
            [str(harness), "--fast", *self._i2c_options(), str(elf)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._launch_ns = time.monotonic_ns()
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self.port = self._proc.stdout.readline().strip()
        if not self.port.startswith("/dev/"):
            self.close()
            raise MeterError(f"simulator {harness}: no pty ({self._stderr_tail()})")
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self._clock: _Clock | None = None
        self._history: list[tuple[int, np.ndarray]] = []  # per-tick inputs before the clock
        # The node's GPIO idles low (the pin's pull-up would read high): drive it low once the
        # firmware has configured the pin, before any host can send START, so the node's
        # first "1" is a rising edge and no edge of ours lands in a run.
        self._horizon_ns = _BOOT_NS + _BOOT_NS // 10
        self._write([f"{_BOOT_NS} m 0\n", f"{self._horizon_ns}\n"])
        time.sleep(_BOOT_WALL_S)

    def request_stop(self) -> None:
        self._stop.set()

    def start(self) -> None:
        """`run()` on a thread of its own; an error that ends it (the harness exited) is kept
        in `error` rather than printed as an uncaught "Exception in thread"."""
        self._driver = DriverThread(self.run, "simavr-driver")
        self._driver.start()

    def stop(self) -> None:
        """End what `start()` began (within 10 s)."""
        self._stop.set()
        if self._driver is not None:
            self._driver.join(timeout=10)

    @property
    def error(self) -> MeterError | None:
        """Why `run()` on the thread `start()` made ended, when it failed; a harness that has
        exited is named at once, before the driver's next tick finds it."""
        if self._driver is None:
            return None
        if not self._stop.is_set() and self._proc.poll() is not None:
            return self._exited()
        # Once named, the harness's exit stays the answer after a stop: the driver, woken by
        # the stop before its next tick, may end without ever raising it.
        return self._driver.error or self._exit_error

    def run(self) -> None:
        tick_ns = int(self.options.tick_s * _NS)
        next_tick = time.monotonic_ns()
        while not self._stop.is_set():
            if self._proc.poll() is not None:
                raise self._exited()
            self._tick()
            next_tick += tick_ns
            pause = next_tick - time.monotonic_ns()
            if pause > 0:
                self._pause(pause / _NS)
            else:
                next_tick = time.monotonic_ns()

    def _pause(self, seconds: float) -> None:
        """Until the next tick, or until a marker edge can be read: it is then stamped when the
        node wrote it, not up to a tick later (a tick a loaded machine stretches well past
        `tick_s`). A stop request waits for the tick."""
        if self._marker.fd < 0:
            self._stop.wait(seconds)
        else:
            select.select([self._marker.fd], [], [], seconds)

    def _exited(self) -> MeterError:
        """The one error for the harness's exit, whoever finds it first."""
        if self._exit_error is None:
            self._exit_error = MeterError(
                f"simulator exited with {self._proc.returncode}: {self._stderr_tail()}"
            )
        return self._exit_error

    def close(self) -> None:
        self._stop.set()
        if self._proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self._proc.stdin is not None
                self._proc.stdin.write("q\n")
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._marker.close()
        self._truth.close()

    # --- one tick ---------------------------------------------------------------------------

    def _tick(self) -> None:
        # The marker line before the clock: every edge read was then written by `now_ns`.
        edges = self._marker.edges(time.monotonic())
        mono_ns = time.monotonic_ns()
        self._power.refresh(mono_ns / _NS)
        now_ns = mono_ns - self._launch_ns  # the simulator's time
        power = self._power.power_mw(self._inputs)
        self._clock_events()
        lines: list[str] = []
        start = self._horizon_ns
        if self._clock is None:
            self._history.append((start, power))
            del self._history[:-_HISTORY_TICKS]
            lines.append(f"{start} {self._millivolts(power[np.newaxis, :])[0]}\n")
            lines += self._i2c_lines(np.array([start]), power[np.newaxis, :])[0]
        else:
            lines += self._sample_lines(self._clock, now_ns, power)
        self._horizon_ns = max(now_ns, self._horizon_ns)
        lines = with_edges(lines, edges, self._launch_ns, start, self._horizon_ns)
        lines.append(f"{self._horizon_ns}\n")
        self._write(lines)
        self._truth.flush()

    def _write(self, lines: list[str]) -> None:
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.writelines(lines)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            try:  # its input closes as it exits: the exit is the news
                self._proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                raise MeterError(
                    f"simulator stopped reading its input: {self._stderr_tail()}"
                ) from None
            raise self._exited() from None

    def _sample_lines(self, clock: _Clock, now_ns: int, power: np.ndarray) -> list[str]:
        """One line per sample due by now_ns, applied at that sample's timer tick."""
        end = (now_ns - clock.t0_ns) // clock.period_ns + 1
        first = clock.next_index
        if end <= first:
            return []
        clock.next_index = end
        self._truth.segment(first, end, self._inputs, power)
        ticks = clock.t0_ns + np.arange(first, end) * clock.period_ns
        times = np.maximum(ticks - clock.period_ns // 2, self._horizon_ns)
        per_sample = np.broadcast_to(power, (end - first, len(power)))
        values = self._millivolts(per_sample)
        i2c = self._i2c_lines(times, per_sample)
        # one time after another: the harness does not let input times go backwards
        return [
            line
            for t, v, more in zip(times.tolist(), values, i2c, strict=True)
            for line in (f"{t} {v}\n", *more)
        ]

    def _i2c_options(self) -> list[str]:
        options: list[str] = []
        both = set(self.options.ina219_sources) & set(self.options.ina226_sources)
        if both:
            raise MeterError(f"simulator: source {min(both)} has an INA219 and an INA226")
        for chip, sources in (
            ("ina219", self.options.ina219_sources),
            ("ina226", self.options.ina226_sources),
        ):
            mask = sum(1 << n for n in sources)
            if mask >> 4:
                raise MeterError(f"simulator: {chip.upper()} sources are 0..3 (0x40..0x43)")
            options += [f"--{chip}", str(mask)] if mask else []
        return options

    def _i2c_lines(self, times: np.ndarray, power: np.ndarray) -> list[list[str]]:
        """Per time, a `T i N UV MV` line per INA219 or INA226: its analog inputs then."""
        ina226 = self.options.ina226 or model_like(self.options.ina219)
        lines: list[list[str]] = [[] for _ in range(len(times))]
        chips: list[tuple[int, Ina219Model | Ina226Model]] = [
            *((n, self.options.ina219) for n in self.options.ina219_sources),
            *((n, ina226) for n in self.options.ina226_sources),
        ]
        for n, model in chips:
            p = power[:, self._inputs.index(n)]
            uv = model.current_a(p) * model.calibration.shunt_ohm * 1e6
            uv = uv + self._rng.normal(0.0, model.noise_uv, uv.shape)
            mv = model.bus_v(p) * 1000
            # an INA226 resolves finer than a whole uV and mV: keep what it resolves
            fmt = "{:.4f}" if isinstance(model, Ina226Model) else "{:.0f}"
            for j, (t, u, m) in enumerate(
                zip(times.tolist(), uv.tolist(), mv.tolist(), strict=True)
            ):
                lines[j].append(f"{t} i {n} {fmt.format(u)} {fmt.format(m)}\n")
        return lines

    def _millivolts(self, power: np.ndarray) -> list[str]:
        """Input lines' values: the sensor's output with fresh noise, in whole millivolts."""
        sensor = self.options.sensor
        mv = sensor.output_mv(power) + self._rng.normal(0.0, sensor.noise_sigma_mv, power.shape)
        whole = np.clip(np.rint(mv * _SIMAVR_SCALE), 0, 5000).astype(np.int64)
        return [" ".join(map(str, row)) for row in whole.tolist()]

    def _clock_events(self) -> None:
        """Take in the harness's clock reports (a START began or ended sampling)."""
        while True:
            try:
                kind, a, b = self._events.get_nowait()
            except queue.Empty:
                return
            if kind == "clock":
                self._begin_run(a, b)
            elif self._clock is not None:
                self._clock = None
                self._history = [(self._horizon_ns, self._power.power_mw(self._inputs))]

    def _begin_run(self, t0_ns: int, period_ns: int) -> None:
        """Samples taken before the clock was known read the per-tick inputs: record them."""
        self._truth.new_start()
        clock = _Clock(t0_ns, period_ns)
        done = max(0, (self._horizon_ns - t0_ns) // period_ns + 1)
        ticks = t0_ns + np.arange(done) * period_ns
        starts = np.array([t for t, _ in self._history] or [0])
        which = np.clip(np.searchsorted(starts, ticks, side="right") - 1, 0, None)
        for k in np.unique(which):
            taken = np.flatnonzero(which == k)
            power = self._history[int(k)][1] if self._history else self._power.power_mw()
            self._truth.segment(int(taken[0]), int(taken[-1]) + 1, self._inputs, power)
        clock.next_index = int(done)
        self._clock = clock
        self._history = []

    # --- harness output ---------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            words = line.split()
            if len(words) == 3 and words[0] == "clock":
                self._events.put(("clock", int(words[1]), int(words[2])))
            elif len(words) == 2 and words[0] == "clock-stop":
                self._events.put(("stop", int(words[1]), 0))

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line.rstrip())
            del self._stderr[:-20]

    def _stderr_tail(self) -> str:
        return self._stderr[-1] if self._stderr else "no message"
