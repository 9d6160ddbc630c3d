"""Energy over a trial's window from a power trace. Pure numpy.

The integration is `analysis.energy.window_energy_mj` (trapezoids, the window's edges
interpolated; `samples` counts the samples the energy depends on, those inside the window and
the neighbour each edge is interpolated from). Energy above idle subtracts the idle baseline
power measured before the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analysis.energy import window_energy_mj

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WindowEnergy:
    energy_mj: float
    energy_above_idle_mj: float
    mean_power_mw: float
    duration_s: float
    samples: int  # the samples the energy depends on: inside, and each edge's neighbour


def energy_in_window(
    t_s: FloatArray, power_mw: FloatArray, start_s: float, end_s: float, idle_mw: float = 0.0
) -> WindowEnergy:
    """Integrate `power_mw` sampled at increasing times `t_s` over [start_s, end_s]."""
    energy_mj, samples = window_energy_mj(t_s, power_mw, start_s, end_s)
    duration = end_s - start_s
    return WindowEnergy(
        energy_mj=energy_mj,
        energy_above_idle_mj=energy_mj - idle_mw * duration,
        mean_power_mw=energy_mj / duration
        if duration > 0
        else float(np.interp(start_s, t_s, power_mw)),
        duration_s=duration,
        samples=samples,
    )
