"""Energy over a trial's window and the trace kept of it, from power samples read in chunks. Pure.

A trial's window is `[start_index, end_index]` on the recording's samples (its marker pulse: the
first sample high to the first sample low again; sample k is at k / rate). Its energy is the
integral of power taken as piecewise linear between samples: the trapezoid rule at full rate,
what `analysis.energy.window_energy_mj` gives over the same samples, but folded chunk by chunk
so that a trial of minutes at 1 MS/s never sits in memory whole.

A sample the recording lacks (pyjls gives NaN where the UI dropped samples) is counted as lost
and bridged linearly from its neighbours, as the live meters' integration bridges a missing
bin; at a window's edge the nearest sample's power stands in. A sample the instrument itself
marked unmeasured (NaN current beside a voltage: `Recording.clipped`) is bridged the same way
but counted as saturated, not lost. Nothing is invented beyond that, and a window with no
sample at all has no energy.

The trace stored for a trial is downsampled as the PPK2's live store keeps its samples: means
over bins of `bin_samples` recording indices, aligned to the recording (bin b covers indices
[b*k, (b+1)*k)), each at the centre of the indices it holds; a bin with no sample is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class EnergyFold:
    """The integral so far over the samples of [start_index, end_index] before `next_index`."""

    start_index: int
    end_index: int  # inclusive: the window's last sample (the pulse's first low one)
    next_index: int = 0
    sum_mw_samples: float = 0.0  # trapezoids between the valid samples so far, mW x samples
    first_valid: int | None = None
    first_mw: float = 0.0
    last_valid: int | None = None
    last_mw: float = 0.0
    valid: int = 0
    lost: int = 0
    saturated: int = 0

    @classmethod
    def over(cls, start_index: int, end_index: int) -> EnergyFold:
        if end_index < start_index:
            raise ValueError(f"window ends at sample {end_index} before it starts ({start_index})")
        return cls(start_index, end_index, next_index=start_index)


def fold_power(
    fold: EnergyFold,
    power_mw: F64,
    first_index: int,
    clipped: npt.NDArray[np.bool_] | None = None,
) -> EnergyFold:
    """`fold` after the samples `power_mw` from `first_index` on; chunks come in order and may
    reach beyond the window on either side (only its samples count). `clipped` (beside
    `power_mw`): which NaN samples the instrument marked, counted saturated rather than lost."""
    end = first_index + len(power_mw)
    lo = max(first_index, fold.next_index)
    hi = min(end, fold.end_index + 1)
    if first_index > fold.next_index and first_index <= fold.end_index:
        raise ValueError(f"chunk starts at sample {first_index}, expected {fold.next_index}")
    if hi <= lo:
        return fold
    values = np.asarray(power_mw[lo - first_index : hi - first_index], dtype=np.float64)
    finite = np.isfinite(values)
    marked = (
        np.zeros(finite.size, dtype=bool)
        if clipped is None
        else clipped[lo - first_index : hi - first_index] & ~finite
    )
    indices = np.flatnonzero(finite) + lo
    values = values[finite]
    moved = replace(
        fold,
        next_index=hi,
        lost=fold.lost + int(np.count_nonzero(~finite & ~marked)),
        saturated=fold.saturated + int(np.count_nonzero(marked)),
    )
    if len(indices) == 0:
        return moved
    if fold.last_valid is not None:
        # The previous chunk's last valid sample joins this chunk's first with a trapezoid.
        indices = np.concatenate(([fold.last_valid], indices))
        values = np.concatenate(([fold.last_mw], values))
    steps = np.diff(indices).astype(np.float64)
    area = float(np.sum(steps * (values[1:] + values[:-1]))) / 2.0
    first_valid, first_mw = (
        (fold.first_valid, fold.first_mw)
        if fold.first_valid is not None
        else (int(indices[0]), float(values[0]))
    )
    return replace(
        moved,
        sum_mw_samples=fold.sum_mw_samples + area,
        first_valid=first_valid,
        first_mw=first_mw,
        last_valid=int(indices[-1]),
        last_mw=float(values[-1]),
        valid=fold.valid + int(np.count_nonzero(finite)),
    )


@dataclass(frozen=True, slots=True)
class WindowTotal:
    energy_mj: float
    duration_s: float
    samples: int  # valid samples inside the window, both edges included
    samples_lost: int
    samples_saturated: int


def window_total(fold: EnergyFold, rate_hz: float) -> WindowTotal:
    """The window's energy once every sample of it was folded; ValueError for a window the
    chunks did not cover, or with no valid sample."""
    if fold.next_index <= fold.end_index:
        raise ValueError(
            f"samples {fold.next_index}..{fold.end_index} of the window were never read"
        )
    if fold.first_valid is None or fold.last_valid is None:
        raise ValueError(
            f"no valid sample in {fold.start_index}..{fold.end_index} "
            f"({fold.lost} lost, {fold.saturated} marked unmeasured)"
        )
    edges = (fold.first_valid - fold.start_index) * fold.first_mw + (
        fold.end_index - fold.last_valid
    ) * fold.last_mw
    return WindowTotal(
        energy_mj=(fold.sum_mw_samples + edges) / rate_hz,
        duration_s=(fold.end_index - fold.start_index) / rate_hz,
        samples=fold.valid,
        samples_lost=fold.lost,
        samples_saturated=fold.saturated,
    )


def bin_means(power_mw: F64, first_index: int, bin_samples: int) -> tuple[F64, F64]:
    """(bin centres in sample indices, mean power) of the bins `power_mw` fills; `first_index`
    must fall on a bin's start (chunks are read bin-aligned, so no bin spans two)."""
    if bin_samples < 1:
        raise ValueError(f"bins of {bin_samples} samples")
    if first_index % bin_samples:
        raise ValueError(f"chunk at sample {first_index} is not on a {bin_samples}-sample bin")
    values = np.asarray(power_mw, dtype=np.float64)
    n = len(values)
    if n == 0:
        return np.empty(0), np.empty(0)
    bins = (n + bin_samples - 1) // bin_samples
    padded = np.full(bins * bin_samples, np.nan)
    padded[:n] = values
    grid = padded.reshape(bins, bin_samples)
    finite = np.isfinite(grid)
    counts = finite.sum(axis=1)
    sums = np.where(finite, grid, 0.0).sum(axis=1)
    offsets = np.arange(bin_samples, dtype=np.float64)
    centres = np.where(finite, offsets, 0.0).sum(axis=1)
    keep = counts > 0
    means = sums[keep] / counts[keep]
    at = first_index + np.flatnonzero(keep) * bin_samples + centres[keep] / counts[keep]
    return at.astype(np.float64), means
