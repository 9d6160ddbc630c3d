"""Where the dashboard's events go: a live rich view on its own thread, or plain lines.

Producers (the sweep engine, the meter watcher) only `post` events; the consumer thread owns the
state and the terminal. `--no-dashboard` swaps the live view for one plain line per trial.
"""

from __future__ import annotations

import queue
import threading
from typing import Protocol

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.live import Live

from controller.dashboard.state import (
    DashboardEvent,
    MeterHealth,
    Notice,
    PowerSamples,
    SweepState,
    TrialFinished,
    apply,
)
from controller.dashboard.view import render

_REFRESH_S = 0.25


class Sink(Protocol):
    def post(self, event: DashboardEvent) -> None: ...
    def close(self) -> None: ...


class LiveDashboard:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.state = SweepState()
        self._events: queue.Queue[DashboardEvent] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard", daemon=True)
        self._thread.start()

    def post(self, event: DashboardEvent) -> None:
        self._events.put(event)

    def _drain(self, live: Live) -> None:
        """Every waiting event into the state, with a frame after each one that moves the
        sweep on (a trial started or finished, a notice): a thread that a busy machine runs
        late still shows every step of the sweep, not only where it has got to. The meter's
        frequent events wait for the next frame."""
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            apply(self.state, event)
            if not isinstance(event, PowerSamples | MeterHealth):
                live.update(render(self.state), refresh=True)

    def _run(self) -> None:
        with Live(render(self.state), console=self.console, auto_refresh=False) as live:
            while not self._stop.wait(_REFRESH_S):
                self._drain(live)
                live.update(render(self.state), refresh=True)
            self._drain(live)
            live.update(render(self.state), refresh=True)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class PlainLines:
    """One line per finished trial and per notice, for logs and CI."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def post(self, event: DashboardEvent) -> None:
        if isinstance(event, TrialFinished):
            settings = " ".join(f"{name}={value}" for name, value in event.point)
            if event.ok:
                self.console.print(
                    f"{event.trial_id} {settings} ok response {_ms(event.response_s)} "
                    f"client CPU {_ms(event.client_cpu_s)} energy {_mj(event.energy_mj)}",
                    highlight=False,
                )
            else:
                self.console.print(
                    f"{event.trial_id} {settings} FAILED: {event.error}", highlight=False
                )
        elif isinstance(event, Notice):
            self.console.print(event.text, highlight=False)

    def close(self) -> None:
        pass


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _mj(energy: float | None) -> str:
    return "-" if energy is None else f"{energy:.1f} mJ"


class MeterSource(Protocol):
    source: str

    def health(self) -> tuple[float, int, int, int]: ...
    def recent_power(
        self, seconds: float
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...


class MeterWatch:
    """Posts the meter's health and its last seconds of power twice a second."""

    def __init__(self, meter: MeterSource, sink: Sink, period_s: float = 0.5) -> None:
        self.meter = meter
        self.sink = sink
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="meter-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                rate, crc, gaps, dropped = self.meter.health()
                t_s, power_mw = self.meter.recent_power(self.period_s)
            except Exception as exc:  # a dying meter is the engine's to report; show why here
                self.sink.post(Notice(f"meter: {exc}"))
                return
            self.sink.post(MeterHealth(self.meter.source, rate, crc, gaps, dropped))
            self.sink.post(PowerSamples(tuple(map(float, t_s)), tuple(map(float, power_mw))))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
