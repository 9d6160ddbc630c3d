"""A trial's window split into its phases, `connect`, `exchange` and `close`, and each one's
energy. Pure.

The client agent stamps the phases' boundaries on its own clock (CLOCK_MONOTONIC, the clock its
marker's edges are stamped on: `agent.client.record.PHASE_MARKS`). Two instants are known both
on that clock and on the meter's timebase: the window's ends. With the marker wired they are its
edges (the agent's raise and lower, and the samples they were seen at), so the linear map
between the two pairs also takes out the drift between the node's clock and the meter's within
the trial (`phase_clock` "marker"). Without it the window was mapped from the client's clock
through the measured clock offset, its ends the fetch's start and the close's end, and the same
map between those reproduces that mapping ("clock_offset").

connect runs from the window's start to the connection being usable, exchange from there to the
workload's last response byte, close from there to the window's end, so the three tile the
window: each is integrated as the window is (`analysis.energy.window_energy_mj`, power linear
between samples, the boundaries interpolated), and their energies sum to the window's.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.energy import window_energy_mj

__all__ = ["ClockMap", "PhaseEnergy", "clock_map", "first_byte_s", "phase_bounds", "phase_energy"]

FloatArray = npt.NDArray[np.float64]

# The record's inner boundaries (agent.client.record.PHASE_MARKS), the client's clock, in order.
_INNER_MARKS = ("connect_done_mono_ns", "exchange_done_mono_ns")
# (`first_byte_mono_ns`, inside exchange, splits it for a workload that declares the split.)


@dataclass(frozen=True)
class ClockMap:
    """The client's clock (ns) onto the meter's timebase (s), linear through two instants known
    on both; `phase_clock` says which two."""

    client_ns: tuple[int, int]
    meter_s: tuple[float, float]
    phase_clock: str  # "marker" or "clock_offset"

    def meter_s_of(self, client_ns: int) -> float:
        (c0, c1), (m0, m1) = self.client_ns, self.meter_s
        # Integer ns differences first: a float of a monotonic ns clock loses its last digits.
        if c1 == c0:  # a window of no length on the client's clock: no rate to take from it
            return m0 + (client_ns - c0) / 1e9
        return m0 + (client_ns - c0) * ((m1 - m0) / (c1 - c0))


def clock_map(
    client: Mapping[str, Any], source: str, meter_start_s: float, meter_end_s: float
) -> ClockMap | None:
    """How a trial's client record maps onto its window [meter_start_s, meter_end_s] (the
    window's ends before any widening for the "process" window), by the window's `source`
    (marker or clock); None when the record has no phases (the nghttp2 engine's tools, whose
    boundaries cannot be seen from outside)."""
    phases = client.get("phases")
    if not isinstance(phases, Mapping):
        return None
    meter = (meter_start_s, meter_end_s)
    if source == "marker":
        edges = (int(phases["marker_raised_mono_ns"]), int(phases["marker_lowered_mono_ns"]))
        return ClockMap(edges, meter, "marker")
    ends = (int(client["t_mono_start_ns"]), int(phases["close_done_mono_ns"]))
    return ClockMap(ends, meter, "clock_offset")


@dataclass(frozen=True)
class PhaseEnergy:
    """A window's phases, in order (`analysis.trial_columns.PHASES`): durations on the meter's
    timebase, energies."""

    phase_clock: str
    durations_s: tuple[float, float, float]
    energies_mj: tuple[float, float, float]
    above_idle_mj: tuple[float, float, float]
    # The exchange split at the first response's headers: (duration s, energy mJ) before and
    # after; None where the trial had no response (for a workload that declares the split).
    exchange_parts: tuple[tuple[float, float], tuple[float, float]] | None = None


def phase_bounds(
    client: Mapping[str, Any], clock: ClockMap, start_s: float, end_s: float
) -> tuple[float, float, float, float]:
    """The window's four phase boundaries on the meter's timebase: its start, connect's end,
    exchange's end, its end. An inner boundary mapped outside the window (a "process" window's
    start-up and teardown are in connect and close; rounding at an edge) is held to it, and
    the boundaries never go back."""
    phases = client["phases"]
    inner = [min(max(clock.meter_s_of(int(phases[name])), start_s), end_s) for name in _INNER_MARKS]
    connect_done = inner[0]
    exchange_done = max(inner[1], connect_done)
    return start_s, connect_done, exchange_done, end_s


def first_byte_s(
    client: Mapping[str, Any], clock: ClockMap, bounds: tuple[float, float, float, float]
) -> float | None:
    """The first response's headers on the meter's timebase, held within the exchange phase
    of `bounds` (phase_bounds); None when the record has no such mark."""
    at = client["phases"].get("first_byte_mono_ns")
    if at is None:
        return None
    return min(max(clock.meter_s_of(int(at)), bounds[1]), bounds[2])


def phase_energy(
    t_s: FloatArray,
    power_mw: FloatArray,
    bounds: tuple[float, float, float, float],
    phase_clock: str,
    *,
    idle_mw: float = 0.0,
    split_s: float | None = None,
) -> PhaseEnergy:
    """Each phase's energy between consecutive `bounds` (phase_bounds), integrated as the
    window's, and above idle (its energy less `idle_mw` over its duration); with `split_s`
    (first_byte_s), the exchange's two parts on either side of it too."""
    spans = tuple(itertools.pairwise(bounds))
    durations = tuple(end - start for start, end in spans)
    energies = tuple(window_energy_mj(t_s, power_mw, start, end)[0] for start, end in spans)
    above = tuple(e - idle_mw * d for e, d in zip(energies, durations, strict=True))
    parts = None
    if split_s is not None:
        before, after = (bounds[1], split_s), (split_s, bounds[2])
        parts = (
            (before[1] - before[0], window_energy_mj(t_s, power_mw, *before)[0]),
            (after[1] - after[0], window_energy_mj(t_s, power_mw, *after)[0]),
        )
    return PhaseEnergy(phase_clock, _three(durations), _three(energies), _three(above), parts)


def _three(values: tuple[float, ...]) -> tuple[float, float, float]:
    first, second, third = values
    return first, second, third
