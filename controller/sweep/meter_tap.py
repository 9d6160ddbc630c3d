"""The meter as the sweep engine uses it (`PowerMeter`), whichever source: what every source's
tap is opened from (`TapRequest`, handed to the opener its declaration names,
controller/meter_sources/<name>/), and what the taps of a stream of numbered samples share
(`StreamTap`: the board's `MeterTap`, the PPK2's `Ppk2Tap`).

A trial's window is cut by its marker edges when they arrived (a rising then a falling edge
after `begin_trial`); otherwise the controller's clock span is mapped onto sample indices. That
mapping uses the arrival time of each read or frame: its last sample was taken no later than
its arrival, so `arrival - last_index / rate` bounds sample 0's time from above, and the
smallest bound over the recent arrivals is the best estimate (transmission delays only add).

A sweep runs for hours; its store must not hold them. What reads old samples: a trial's window
and its retries lie after their own `begin_trial` (the trial's processes start after it); the
clock mapping looks `_MAPPING_HORIZON_S` back from the latest arrival; the dashboard reads the
last half-second and the idle baseline its last seconds (at the run's start, before any trial;
at its end, after the last one began); marker edges are paired from those after `begin_trial`.
So each `begin_trial` releases what arrived more than `release_horizon_s` (`RELEASE_HORIZON_S`,
a minute) before the latest read: held samples stay within that horizon plus the longest trial,
however long the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from analysis.energy import window_samples
from controller.config.model import MeterConfig
from controller.errors import MeterError
from controller.sweep.errors import MeterLost
from controller.sweep.interfaces import PowerMeter

__all__ = [
    "INCOMPLETE_PULSE",
    "MARKER_SLACK_S",
    "RELEASE_HORIZON_S",
    "FloatArray",
    "IntArray",
    "SampleSource",
    "StreamTap",
    "Tap",
    "TapRequest",
    "open_tap",
    "release_point",
    "saturated_in",
]

# Frames considered when mapping a clock span to sample indices: recent enough that the board's
# crystal and the host's clock cannot drift apart noticeably, many enough to find a fast one.
_MAPPING_HORIZON_S = 30.0
# What a trial's `begin_trial` keeps behind it (see the module doc): the mapping's horizon with
# room to spare, so no read after it can tell that anything was released.
RELEASE_HORIZON_S = max(_MAPPING_HORIZON_S, 60.0)
# Samples after a trial's end may still be on the wire.
_LATE_SAMPLES_TIMEOUT_S = 3.0
# How long after the controller's end of a trial its marker's falling edge may still be sampled.
MARKER_SLACK_S = 0.05
INCOMPLETE_PULSE = "the trial's marker pulse is incomplete (a rising edge, no falling one)"
# How long a lost pty waits for its modelled meter to say why it stopped.
_SOURCE_ERROR_WAIT_S = 2.0

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class _Session(Protocol):
    """What both taps ask of their session."""

    @property
    def name(self) -> str: ...

    @property
    def reader_error(self) -> MeterError | None: ...

    def close(self) -> None: ...


class SampleSource(Protocol):
    """What both taps read of their store (`SampleStore`, `Ppk2Store`)."""

    @property
    def next_index(self) -> int:
        """One past the highest sample index received."""
        ...

    def arrivals(self) -> tuple[IntArray, IntArray]:
        """(last sample index of each read or frame, monotonic ns of its arrival)."""
        ...


_Rest = TypeVar("_Rest")


@dataclass(frozen=True)
class TapRequest:
    """What a source's tap is opened from: the config's meter, the serial device to read (the
    config's port, or the modelled device's pty; None where the source has neither), what the
    manifest records of that device, and for a modelled one why it stopped should it fail, and
    the client's software marker line it reads."""

    meter: MeterConfig
    port: str | None
    facts: Mapping[str, Any]
    source_error: Callable[[], BaseException | None] | None = None
    marker_fifo: Path | None = None

    @property
    def device_port(self) -> str:
        """The port, for a source that reads one."""
        if self.port is None:
            raise MeterError(f"the {self.meter.source} meter has no port to read")
        return self.port


class Tap(PowerMeter, Protocol):
    """What a source's tap is to the sweep: its `PowerMeter`, and its last seconds of power
    for the dashboard."""

    def recent_power(self, seconds: float) -> tuple[FloatArray, FloatArray]:
        """The last `seconds` of power (meter time in s, mW)."""
        ...


def open_tap(request: TapRequest) -> Tap:
    """The sweep's tap on the meter `request.meter` names, opened by its source's declaration."""
    spec = request.meter.spec
    tap: Tap = spec.load(spec.tap)(request)
    return tap


@dataclass(frozen=True)
class _Span(Generic[_Rest]):
    """A window read: (t_s, power_mw, start_s, end_s), and what the tap's `_power` reports of
    the samples that did not arrive."""

    trace: tuple[FloatArray, FloatArray, float, float]
    rest: _Rest


def release_point(last: IntArray, arrival_ns: IntArray, horizon_s: float) -> int:
    """The sample index below which every read (`last`: each one's last index, `arrival_ns`:
    when it arrived, both in arrival order) arrived more than `horizon_s` before the latest; 0
    when none did."""
    if last.size == 0:
        return 0
    old = int(np.searchsorted(arrival_ns, arrival_ns[-1] - int(horizon_s * 1e9)))
    return int(last[old - 1]) + 1 if old else 0


def saturated_in(
    trace: tuple[FloatArray, FloatArray, float, float], clipped: npt.NDArray[np.bool_]
) -> int:
    """How many of a window's clipped samples (`clipped`: beside the trace's samples) its
    energy depends on: of the samples its row's `samples` counts, so the two compare."""
    t_s, _power_mw, start_s, end_s = trace
    if len(t_s) < 2 or start_s < t_s[0] or end_s > t_s[-1]:
        return 0  # no energy either: the trace does not cover the window
    return int(np.count_nonzero(clipped[window_samples(t_s, start_s, end_s)]))


class StreamTap(Generic[_Rest]):
    """What the board's `MeterTap` and the PPK2's `Ppk2Tap` share: a stream of samples numbered
    from 0 at `rate_hz` (sample indices, or the PPK2's stream indices), the clock's mapping onto
    them, the wait for late samples, and how a lost session is reported. A tap says how to read
    its store."""

    _label = "meter"  # how its lines name the device
    session: _Session
    source: str
    rate_hz: float
    _source_error: Callable[[], BaseException | None] | None
    release_horizon_s = RELEASE_HORIZON_S

    @property
    def _samples(self) -> SampleSource:
        """The store the session's reader fills."""
        raise NotImplementedError

    def _power(self, first: int, end: int) -> tuple[FloatArray, FloatArray, _Rest]:
        """Meter time (s) and power (mW) of the samples first..end-1 that arrived, and what
        the tap's window reports of the rest."""
        raise NotImplementedError

    def _release(self, index: int) -> None:
        """Forget the samples below `index`, and the bookkeeping of the reads that held them."""
        raise NotImplementedError

    def _release_old(self) -> None:
        """Release what arrived more than `release_horizon_s` before the latest read: as a
        trial begins, nothing later reads back that far (see the module doc)."""
        index = release_point(*self._samples.arrivals(), self.release_horizon_s)
        if index:
            self._release(index)

    def _trace(self, first: int, end: int) -> tuple[FloatArray, FloatArray]:
        t_s, power_mw, _rest = self._power(first, end)
        return t_s, power_mw

    def _read(
        self, start_index: float, end_index: float, before_s: float, after_s: float, pad: int
    ) -> _Span[_Rest]:
        """A trial's window between two sample indices, widened by `before_s` and `after_s`,
        read `pad` samples beyond each end once the last of those has arrived."""
        start_index -= before_s * self.rate_hz
        end_index += after_s * self.rate_hz
        self._await(int(np.ceil(end_index)) + pad)
        first = max(0, int(np.floor(start_index)) - pad)
        t_s, power_mw, rest = self._power(first, int(np.ceil(end_index)) + pad)
        return _Span((t_s, power_mw, start_index / self.rate_hz, end_index / self.rate_hz), rest)

    def idle_baseline_mw(self, seconds: float) -> float:
        self._check()
        first = self._samples.next_index
        time.sleep(seconds)
        end = self._samples.next_index
        if end <= first:
            raise self._lost("no samples during the idle baseline")
        return float(self._trace(first, end)[1].mean())

    def recent_power(self, seconds: float) -> tuple[FloatArray, FloatArray]:
        """The last `seconds` of power (meter time in s, mW), for the dashboard."""
        end = self._samples.next_index
        first = max(0, end - int(seconds * self.rate_hz))
        return self._trace(first, end)

    def close(self) -> None:
        self.session.close()

    # internals ------------------------------------------------------------------------------

    def _lost(self, what: str) -> MeterLost:
        # A modelled meter whose driver failed keeps its pty open: its samples just stop. Its
        # error, if it has one, is why.
        source = self._source_error() if self._source_error is not None else None
        why = f" ({self.source}: {source})" if source is not None else ""
        lost = MeterLost(f"{self._label} {self.session.name}: {what}{why}", port=self.session.name)
        lost.__cause__ = source
        return lost

    def _check(self) -> None:
        error = self.session.reader_error
        if error is None:
            return
        source = self._why_the_source_stopped()
        if source is not None:
            # The pty closed because what drives it stopped (the simavr harness exited): that
            # is the cause to name and keep.
            raise MeterLost(
                f"{error} ({self.source}: {source})", port=self.session.name
            ) from source
        # The reader's error names the port and why reading stopped; keep it as the cause.
        raise MeterLost(str(error), port=self.session.name) from error

    def _why_the_source_stopped(self) -> BaseException | None:
        """The modelled meter's own error, once its driver has seen what closed the pty (it
        looks every tick; a loaded machine may take a moment)."""
        if self._source_error is None:
            return None
        deadline = time.monotonic() + _SOURCE_ERROR_WAIT_S
        while (source := self._source_error()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return source

    def _indices_of(self, start_wall_ns: int, end_wall_ns: int) -> tuple[float, float]:
        last, arrival_ns = self._samples.arrivals()
        if last.size == 0:
            raise self._lost("no samples have arrived")
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        recent = arrival_ns >= arrival_ns[-1] - int(_MAPPING_HORIZON_S * 1e9)
        sample0_mono_ns = float(np.min(arrival_ns[recent] - last[recent] * 1e9 / self.rate_hz))

        def index(wall_ns: int) -> float:
            return (wall_ns - wall_minus_mono - sample0_mono_ns) * self.rate_hz / 1e9

        return index(start_wall_ns), index(end_wall_ns)

    def _await(self, index: int) -> None:
        deadline = time.monotonic() + _LATE_SAMPLES_TIMEOUT_S
        while self._samples.next_index <= index:
            self._check()
            if time.monotonic() > deadline:
                raise self._lost(
                    f"sample {index} has not arrived "
                    f"{_LATE_SAMPLES_TIMEOUT_S:g} s after the trial ended"
                )
            time.sleep(0.005)
