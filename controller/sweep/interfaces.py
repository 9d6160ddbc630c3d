"""What the sweep engine needs from the nodes and the meter, whatever their transport or source.

The engine is written against these two protocols; `controller.nodes` (local subprocesses or SSH)
and `controller.meter` (serial board, virtual meter, simavr) provide them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from controller.config.model import TrialPoint
from controller.sweep.plan import PlannedTrial


@dataclass(frozen=True)
class PowerWindow:
    """The meter's samples covering one trial, on the meter's own timebase."""

    t_s: npt.NDArray[np.float64]  # seconds, increasing
    power_mw: npt.NDArray[np.float64]
    start_s: float  # the trial's window on that timebase
    end_s: float
    source: Literal["marker", "clock"]
    samples_lost: int
    crc_errors: int
    frame_gaps: int
    # Samples inside the window that read at the meter's full scale (an ADC at its rail, an
    # INA2xx overflow or a shunt register at its limit, a PPK2 at the top of its top range):
    # clipped, so the window's energy is at most what the load drew.
    samples_saturated: int
    # Why a window with marker edges in its stream still went by the clock ("" otherwise).
    clock_reason: str = ""


class TrialNodes(Protocol):
    def facts(self) -> Mapping[str, Any]:
        """Per node: host, Python, agent version, CPU model, pinning, clock offset."""
        ...

    def ensure_server(self, point: TrialPoint) -> None:
        """Make sure the server agent serves this grid point (restart only on change)."""
        ...

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        """Run one trial of the workload on the client; its JSON record (`ok` false on
        failure)."""
        ...

    def server_trial(self, trial_id: str, timeout_s: float) -> dict[str, Any] | None:
        """The server agent's record for the trial, or None when it never appeared."""
        ...

    def client_clock_offset_ns(self) -> int:
        """Client clock minus controller clock (0 for local nodes)."""
        ...

    def trial_events(self, trial_id: str) -> dict[str, bytes]:
        """The trial's event traces (qlog) by role, `{}` when the run takes none."""
        ...

    def close(self) -> None: ...


class PowerMeter(Protocol):
    source: str

    def facts(self) -> Mapping[str, Any]:
        """Identity, rate, channels, calibration: recorded in the run's manifest."""
        ...

    def idle_baseline_mw(self, seconds: float) -> float:
        """Mean power over `seconds` with the nodes idle."""
        ...

    def begin_trial(self) -> None:
        """A trial is about to start: its marker edges (where wired) belong to it."""
        ...

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        """The trial's power: cut by its marker edges when they arrived, else by the controller
        wall-clock span mapped onto the meter's timebase; widened by `before_s` and `after_s`
        (the energy window "process": the trial process around the fetch)."""
        ...

    def health(self) -> tuple[float, int, int, int]:
        """(sample rate achieved in samples/s, CRC errors, frame gaps, samples dropped)."""
        ...

    def close(self) -> None: ...


class SharedTrials(Protocol):
    """The trials of a sweep several benches share (controller.sweep.shared): which this bench
    takes, and what it tells of each."""

    def claimed(self, plan: Sequence[PlannedTrial]) -> Iterator[PlannedTrial]:
        """The planned trials this bench takes, one at a time, until none is left to take."""
        ...

    def finished(self, trial: PlannedTrial, row: Mapping[str, object] | None) -> None:
        """A taken trial's ok row, or None: it failed every attempt."""
        ...

    def released(self, trial: PlannedTrial) -> None:
        """The sweep paused with `trial` taken: another bench may take it."""
        ...

    def remaining(self) -> int:
        """Trials no bench has finished yet."""
        ...
