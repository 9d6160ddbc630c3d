"""The virtual meter: a pseudo-terminal that speaks the board's wire protocol and commands, its
current from a power model driven by the CPU use of the watched nodes.

Every `tick_s` it measures the CPU used since the last tick, sets each input's power from the
model (`node_power.NodePower`), and lets the device model (`device.DeviceCore`) take the samples
due by then through an ACS712 and a 10-bit ADC (`sensor.Acs712`). Commands and marker edges
refresh the power first, so each sample carries the power of the moment it was taken; a marker
edge refreshes it as of the edge's own instant (see `run`). The
ground-truth file and the marker FIFO are described in `node_power`.

INA219 channels (protocol 2): the INA219 at 0x40 + n measures what analog input n would (the
n-th watched source), through `ina219.Ina219Model`: the supply's bus voltage with its droop,
current = P / V, both quantised as the chip's registers. An INA226 channel (the host marked
the chip at 0x40 + n as one, bit 4 + n of SET_I2C_CHANNELS) goes through `ina226.Ina226Model`
instead, in the same supply and shunt unless `ina226` is given.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
import tty
from dataclasses import dataclass, field

import numpy as np

from controller.errors import MeterError
from controller.meter.device import BoardIdentity, DeviceCore
from controller.meter.driver import DriverThread
from controller.meter.ina219 import ADDRESSES as INA219_ADDRESSES
from controller.meter.ina219 import Ina219Model
from controller.meter.ina226 import Ina226Model, model_like
from controller.meter.node_power import (
    EdgeLog,
    MarkerFifo,
    ModelledMeterOptions,
    NodePower,
    TruthWriter,
)
from controller.meter.protocol import SampleArray

_OUTPUT_CAP_BYTES = 1 << 20  # a host that stops reading loses the oldest bytes beyond this


@dataclass(frozen=True)
class VirtualMeterOptions(ModelledMeterOptions):
    identity: BoardIdentity = field(default_factory=BoardIdentity)
    ina219: Ina219Model = field(default_factory=Ina219Model)
    ina226: Ina226Model | None = None  # None: the INA219 model's supply and shunt


class VirtualMeter:
    """Open it, hand `port` to a reader, then `run()` (blocking) or `start()` (a thread)."""

    def __init__(self, options: VirtualMeterOptions) -> None:
        self.options = options
        self._power = NodePower(
            options.watch,
            options.model,
            time.monotonic(),
            no_load=options.no_load,
        )
        self._rng = np.random.default_rng(options.seed)
        self._ina226 = options.ina226 or model_like(options.ina219)
        self._device = DeviceCore(self._sample, options.identity, self._sample_i2c)
        self._truth = TruthWriter(options.truth_path)
        self._edges = EdgeLog(options.edges_path)
        self._marker = MarkerFifo(options.marker_fifo)
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line discipline before a host configures it
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        self._out = bytearray()
        self._stop = threading.Event()
        self._driver: DriverThread | None = None

    def start(self) -> None:
        """`run()` on a thread of its own; an error that ends it is kept in `error`."""
        self._driver = DriverThread(self.run, "virtual-meter")
        self._driver.start()

    @property
    def error(self) -> MeterError | None:
        """Why `run()` on the thread `start()` made ended, when it failed."""
        return self._driver.error if self._driver is not None else None

    def request_stop(self) -> None:
        """Make `run()` return soon; safe from a signal handler."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._driver is not None:
            self._driver.join()

    def close(self) -> None:
        self.stop()
        for fd in (self._master, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._marker.close()
        self._truth.close()
        self._edges.close()

    def run(self) -> None:
        """Serve until `stop()`."""
        _prompt()
        tick = self.options.tick_s
        next_tick = time.monotonic()
        while not self._stop.is_set():
            readers = [self._master] + ([self._marker.fd] if self._marker.fd >= 0 else [])
            writers = [self._master] if self._out else []
            timeout = max(0.0, min(next_tick - time.monotonic(), 0.1))
            readable, _, _ = select.select(readers, writers, [], timeout)
            now = time.monotonic()
            if self._master in readable:
                self._on_host_bytes(now)
            # Read every pass, not only when select saw the line: an edge written after select
            # returned is then stamped before the samples up to `now` are taken.
            for edge in self._marker.edges(now):
                # The node waits until its edge is read (agent.marker), so what it did since
                # the previous reading was done before the edge's instant: this reading is
                # booked up to there, however late this thread ran (its work then falls on
                # the right side of the trial's window, as the truth check sees).
                self._power.refresh(edge.at_s)
                index = self._device.marker(edge.level, edge.at_s)
                if index is not None:
                    inputs = len(self.options.watch)
                    self._edges.edge(self._truth.starts, index, edge.level, self._power, inputs)
            if now >= next_tick:
                self._power.refresh(now)
                self._device.advance(now)
                next_tick = max(next_tick + tick, now)
                self._truth.flush()
            self._flush_output()

    def _on_host_bytes(self, now: float) -> None:
        try:
            data = os.read(self._master, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            raise MeterError(f"virtual meter {self.port}: read failed: {exc.strerror}") from None
        self._power.refresh(now)
        self._device.receive(data, now)

    def _sample(
        self, first_index: int, count: int, inputs: tuple[int, ...], oversampling: int
    ) -> SampleArray:
        if first_index == 0:
            self._truth.new_start()
        power = self._power.power_mw(inputs)
        self._truth.segment(first_index, first_index + count, inputs, power)
        return self.options.sensor.codes(
            np.broadcast_to(power, (count, len(inputs))), self._rng, oversampling
        )

    def _sample_i2c(self, first_index: int, count: int, addresses: tuple[int, ...]) -> SampleArray:
        sources = tuple(INA219_ADDRESSES.index(a) for a in addresses)
        if first_index == 0 and not self._device.channels:
            self._truth.new_start()
        power = self._power.power_mw(sources)
        unrecorded = tuple(n for n in sources if n not in self._device.channels)
        if unrecorded:  # the truth rows name the source's analog input
            self._truth.segment(
                first_index, first_index + count, unrecorded, self._power.power_mw(unrecorded)
            )
        values = np.empty((count, 2 * len(sources)), dtype=np.uint16)
        ina226 = self._device.ina226_addresses
        for k, address in enumerate(addresses):
            model = self._ina226 if address in ina226 else self.options.ina219
            shunt, bus = model.registers(np.broadcast_to(power[k], (count,)), self._rng)
            values[:, 2 * k] = shunt
            values[:, 2 * k + 1] = bus
        return values

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


def _prompt() -> None:
    """Real-time priority for the calling thread, where this process may have it (root).

    A board notices a marker edge within microseconds (a pin interrupt); this thread notices a
    node's FIFO line only when the kernel runs it, which under load can be milliseconds late,
    and an edge stamped late moves the node's work across the trial's window edge. The thread
    sleeps in select() between ticks and does well under a millisecond of work per tick, so the
    lowest real-time priority costs the nodes nothing but lets it run as soon as it wakes."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
