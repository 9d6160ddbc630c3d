"""A meter that always reads POWER_MW: its samples are made for whatever span is asked, on the
controller's monotonic clock, the one a local client stamps its marker edges with. Each window
it cuts by the marker is written to EDGES_FILE beside the marker's FIFO, for the test to
compare with the row."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from controller.meter.node_power import MarkerEdge, MarkerFifo
from controller.sweep.interfaces import PowerWindow
from controller.sweep.meter_tap import TapRequest

POWER_MW = 1500.0
RATE_HZ = 1000
EDGES_FILE = "toy-edges.txt"

F64 = npt.NDArray[np.float64]


class ToyTap:
    source = "toy"

    def __init__(self, marker_fifo: Path) -> None:
        self._marker = MarkerFifo(marker_fifo)
        self._edges_path = marker_fifo.parent / EDGES_FILE
        self._edges: list[MarkerEdge] = []
        self._seen = 0

    def facts(self) -> Mapping[str, Any]:
        return {"source": self.source, "power_mw": POWER_MW, "sample_rate_hz": RATE_HZ}

    def idle_baseline_mw(self, seconds: float) -> float:
        time.sleep(seconds)
        return POWER_MW

    def begin_trial(self) -> None:
        self._read()
        self._seen = len(self._edges)

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        self._read()
        edges = self._edges[self._seen :]
        source: Literal["marker", "clock"] = "clock"
        rising = next((e.at_s for e in edges if e.level == 1), None)
        falling = next((e.at_s for e in edges if e.level == 0 and rising is not None), None)
        if rising is not None and falling is not None and falling > rising:
            start_s, end_s, source = rising, falling, "marker"
            with self._edges_path.open("a") as out:
                out.write(f"{start_s!r} {end_s!r}\n")
        else:
            wall_minus_mono = time.time_ns() - time.monotonic_ns()
            start_s = (start_wall_ns - wall_minus_mono) / 1e9
            end_s = (end_wall_ns - wall_minus_mono) / 1e9
        start_s, end_s = start_s - before_s, end_s + after_s
        t_s, power_mw = self._samples(start_s, end_s)
        return PowerWindow(t_s, power_mw, start_s, end_s, source, 0, 0, 0, 0)

    def health(self) -> tuple[float, int, int, int]:
        return float(RATE_HZ), 0, 0, 0

    def recent_power(self, seconds: float) -> tuple[F64, F64]:
        now_s = time.monotonic()
        return self._samples(now_s - seconds, now_s)

    def close(self) -> None:
        self._marker.close()

    def _read(self) -> None:
        self._edges += self._marker.edges(time.monotonic())

    @staticmethod
    def _samples(start_s: float, end_s: float) -> tuple[F64, F64]:
        """Samples on the rate's grid covering [start_s, end_s] and one beyond each end."""
        first, last = math.floor(start_s * RATE_HZ), math.ceil(end_s * RATE_HZ)
        t_s = np.arange(first, last + 1, dtype=np.float64) / RATE_HZ
        return t_s, np.full(len(t_s), POWER_MW)


def open_toy_tap(request: TapRequest) -> ToyTap:
    if request.marker_fifo is None:
        raise ValueError("the toy meter reads the client's software marker: a local client")
    return ToyTap(request.marker_fifo)
