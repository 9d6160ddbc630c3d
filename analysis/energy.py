"""Energy over a window of a power trace: the one integration the controller (energy per trial)
and the analysis (the modelled meters' ground truth) share. Pure numpy.

Power is taken as piecewise linear between samples (the meter samples uniformly, so this is the
trapezoid rule), interpolated at the window's edges so a window need not start on a sample. The
energy then depends on the samples inside the window and on the one just outside each edge
(the neighbour an edge is interpolated from; none when the edge falls on a sample): `samples`
counts exactly those.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def window_energy_mj(
    t_s: FloatArray, power_mw: FloatArray, start_s: float, end_s: float
) -> tuple[float, int]:
    """(mJ integrated over [start_s, end_s], samples the result depends on); times in s,
    increasing, power in mW. ValueError when the trace does not cover the window."""
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
    used = window_samples(t_s, start_s, end_s)
    return float(np.trapezoid(powers, times)), used.stop - used.start


def window_samples(t_s: FloatArray, start_s: float, end_s: float) -> slice:
    """The samples the energy over [start_s, end_s] depends on, of a trace covering it: those
    inside and the one at or just outside each edge, which the edge's value comes from."""
    first = int(np.searchsorted(t_s, start_s, side="right")) - 1
    last = int(np.searchsorted(t_s, end_s, side="left"))
    return slice(first, last + 1)
