"""ppk2-api's spike filter, vectorised: the samples after a range change replaced by moving
averages (the rule, its constants and how closely it is matched: the decoder's docstring)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from controller.meter.ppk2.metadata import TOP_RANGE

F64 = NDArray[np.float64]
U8 = NDArray[np.uint8]

SPIKE_ALPHA: Final = 0.18
SPIKE_ALPHA_TOP_RANGE: Final = 0.06
SPIKE_SAMPLES: Final = 3  # the change sample and the next two
SPIKE_SKIP_TOP_RANGE: Final = 2  # samples entering the top range left out of the averages

_SCAN_BLOCK = 256  # (1 - 0.18)**256 ~ 1e-22: the within-block products stay in range
_TAIL_SAMPLES = 2048  # 0.94**2048 ~ 1e-55: older samples cannot move the averages' state


@functools.cache
def _powers(keep: float) -> F64:
    powers: F64 = keep ** np.arange(1, _SCAN_BLOCK + 1, dtype=np.float64)
    powers.flags.writeable = False
    return powers


def _ema(x: F64, skip: NDArray[np.bool_] | None, alpha: float, previous: float | None) -> F64:
    """y[n] = alpha * x[n] + (1 - alpha) * y[n-1], or y[n-1] where skip[n]; y[-1] = previous,
    or x[0] exactly when there is none (as ppk2-api starts its averages). Vectorised by
    blocks: within a block y = P * cumsum(d / P) with P the running product of the factors,
    then each block's start value carried over in a loop over blocks, not samples."""
    n = x.size
    blocks = -(-n // _SCAN_BLOCK)
    keep = 1.0 - alpha
    d = np.zeros(blocks * _SCAN_BLOCK)
    d[:n] = alpha * x
    if previous is None:
        previous = float(x[0])
        skip = np.zeros(n, dtype=np.bool_) if skip is None else skip.copy()
        skip[0] = True  # y[0] = x[0] exactly, not alpha*x0 + (1-alpha)*x0
    product: F64
    if skip is None:
        product = np.broadcast_to(_powers(keep), (blocks, _SCAN_BLOCK))
    else:
        factor = np.ones(blocks * _SCAN_BLOCK)
        factor[:n] = np.where(skip, 1.0, keep)
        d[:n][skip] = 0.0
        product = np.cumprod(factor.reshape(blocks, _SCAN_BLOCK), axis=1, dtype=np.float64)
    local = product * np.cumsum(d.reshape(blocks, _SCAN_BLOCK) / product, axis=1)
    starts = np.empty(blocks)
    y = previous
    for b in range(blocks):
        starts[b] = y
        y = float(local[b, -1] + product[b, -1] * y)
    out: F64 = (local + product * starts[:, None]).reshape(-1)[:n]
    return out


def _ema_end(x: F64, alpha: float, previous: float | None) -> float:
    """The last value of `_ema(x, None, alpha, previous)`, from the last _TAIL_SAMPLES only."""
    if x.size > _TAIL_SAMPLES:
        # The state before the tail weighs (1 - alpha)**2048 < 1e-55: any stand-in will do.
        previous = float(x[-_TAIL_SAMPLES - 1])
        x = x[-_TAIL_SAMPLES:]
    return float(_ema(x, None, alpha, previous)[-1])


@dataclass(slots=True)
class SpikeFilter:
    """ppk2-api's filter state: both averages, the last range, samples since a range change."""

    average: float | None = None
    average_top: float | None = None
    last_range: int | None = None
    since_change: int = SPIKE_SAMPLES  # outside a filter window

    def apply(self, amperes: F64, meas_range: U8) -> F64:
        n = amperes.size
        if n == 0:
            return amperes
        before = np.empty(n, dtype=np.int16)
        before[0] = meas_range[0] if self.last_range is None else self.last_range
        before[1:] = meas_range[:-1]
        positions = np.arange(n)
        last_change = np.maximum.accumulate(np.where(meas_range != before, positions, -1))
        since = np.where(
            last_change >= 0, positions - last_change, self.since_change + 1 + positions
        )
        window = since < SPIKE_SAMPLES
        self.last_range = int(meas_range[-1])
        self.since_change = int(min(since[-1], SPIKE_SAMPLES))
        if not window.any():
            self.average = _ema_end(amperes, SPIKE_ALPHA, self.average)
            self.average_top = _ema_end(amperes, SPIKE_ALPHA_TOP_RANGE, self.average_top)
            return amperes
        top = meas_range == TOP_RANGE
        skip = window & top & (since < SPIKE_SKIP_TOP_RANGE)
        average = _ema(amperes, skip if skip.any() else None, SPIKE_ALPHA, self.average)
        average_top = _ema(
            amperes, skip if skip.any() else None, SPIKE_ALPHA_TOP_RANGE, self.average_top
        )
        self.average = float(average[-1])
        self.average_top = float(average_top[-1])
        out = amperes.copy()
        low = window & ~top
        out[low] = average[low]
        out[window & top] = average_top[window & top]
        return out
