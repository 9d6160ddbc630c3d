"""The modelled meters' ground truth: the exact power they modelled for every sample.

A virtual or simulated meter writes it as `meter-truth.csv` (data/README.md); `Truth` reads it.
Light on purpose (numpy only): the modelled meters import its header. The check of each trial
against it is `analysis.agreement`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from analysis.errors import RunFormatError

TRUTH_FILE = "meter-truth.csv"
TRUTH_HEADER = "start,first_sample_index,end_sample_index,analog_input,power_mw\n"
EDGES_FILE = "meter-edges.csv"
EDGES_HEADER = "start,sample_index,level,analog_input,interface_bytes,interface_packets\n"
"""The virtual meter's marker edges: the sample index each was stamped with and the input's
interface counters (cumulative) at that moment (`controller.meter.node_power.EdgeLog`)."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Truth:
    """Segments: samples first..end-1 of the `start`-th START on `analog_input` at `power_mw`."""

    start: IntArray
    first_sample_index: IntArray
    end_sample_index: IntArray
    analog_input: IntArray
    power_mw: FloatArray

    @classmethod
    def load(cls, path: Path) -> Truth:
        try:
            with path.open(encoding="ascii") as f:
                header = f.readline()
                rows = np.loadtxt(f, delimiter=",", ndmin=2)
        except OSError as exc:
            raise RunFormatError(f"{path}: cannot read: {exc.strerror}") from None
        except ValueError as exc:
            raise RunFormatError(f"{path}: not a truth file: {exc}") from None
        if header != TRUTH_HEADER:
            raise RunFormatError(f"{path}: header is not {TRUTH_HEADER.strip()!r}")
        if rows.size == 0:
            rows = np.empty((0, 5))
        ints = rows[:, :4].astype(np.int64)
        return cls(ints[:, 0], ints[:, 1], ints[:, 2], ints[:, 3], rows[:, 4].copy())

    @property
    def starts(self) -> int:
        return int(self.start.max()) if len(self.start) else 0

    def per_sample(self, analog_input: int = 0, start: int | None = None) -> FloatArray:
        """Power of every sample 0..n-1 of one START (default: the last); NaN where unknown."""
        run = self.starts if start is None else start
        keep = (self.start == run) & (self.analog_input == analog_input)
        ends = self.end_sample_index[keep]
        out = np.full(int(ends.max()) if len(ends) else 0, np.nan)
        for first, end, power in zip(
            self.first_sample_index[keep], ends, self.power_mw[keep], strict=True
        ):
            out[first:end] = power
        return out
