"""Energy over a trial's window from a power trace. Pure numpy.

Power is taken as piecewise linear between samples (the meter samples uniformly, so this is the
trapezoid rule), interpolated at the window's edges so a window need not start on a sample.
Energy above idle subtracts the idle baseline power measured before the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WindowEnergy:
    energy_mj: float
    energy_above_idle_mj: float
    mean_power_mw: float
    duration_s: float
    samples: int  # samples strictly inside the window


def energy_in_window(
    t_s: FloatArray, power_mw: FloatArray, start_s: float, end_s: float, idle_mw: float = 0.0
) -> WindowEnergy:
    """Integrate `power_mw` sampled at increasing times `t_s` over [start_s, end_s]."""
    if end_s < start_s:
        raise ValueError(f"window ends ({end_s}) before it starts ({start_s})")
    if len(t_s) != len(power_mw):
        raise ValueError("times and powers differ in length")
    if len(t_s) < 2 or start_s < t_s[0] or end_s > t_s[-1]:
        raise ValueError(
            f"power trace covers {t_s[0] if len(t_s) else 'nothing'}..{t_s[-1] if len(t_s) else ''}"
            f" s, not the window {start_s}..{end_s} s"
        )
    inside = (t_s > start_s) & (t_s < end_s)
    edges = np.interp([start_s, end_s], t_s, power_mw)
    times = np.concatenate(([start_s], t_s[inside], [end_s]))
    powers = np.concatenate(([edges[0]], power_mw[inside], [edges[1]]))
    energy_mj = float(np.trapezoid(powers, times))  # mW x s = mJ
    duration = end_s - start_s
    return WindowEnergy(
        energy_mj=energy_mj,
        energy_above_idle_mj=energy_mj - idle_mw * duration,
        mean_power_mw=energy_mj / duration if duration > 0 else float(edges[0]),
        duration_s=duration,
        samples=int(inside.sum()),
    )
