"""The trial marker's pulses in a recording's GPI samples, and their match to a run's trials. Pure.

The client raises its marker line (wired to the Joulescope's GPI0) for the duration of each
trial attempt, failed ones included, so the recording holds one pulse per attempt that reached
the client agent. A pulse is `[start_index, end_index)` in sample indices: `start_index` the
first sample high, `end_index` the first sample low again, so its length is exact to a sample.

`scan_bits` folds over the GPI samples chunk by chunk (a recording is read in pieces); a line
already high at the recording's first sample is not a pulse (its rising edge was not recorded),
nor is one still high at the end.

A recorder that passes the device's sample ids through leaves a skip where the device dropped
samples; pyjls fills it with NaN in the float signals but with 0 in the GPI bits, which would cut
a pulse spanning it in two. So a sample flagged dropped (NaN in the float signals) that reads 0 is
unknown, not low (a fill is never 1), and the scan looks across it: a line high on both sides
stays high, and an edge somewhere inside is put where the window covers the whole drop (a rise
at its first sample, a fall after its last), whose samples the energy then counts as lost. Each
drop is kept (`Drop`), so that a pulse that still does not fit can name a drop near it (a drop
may swallow a whole pulse, or the fall and rise between two).

`match_pulses` pairs the pulses in order with the run's attempts that have a client record. Each
pair must agree in duration (the client's own wall clock, start to end, against the pulse's
length) and in spacing (the time since the previous attempt's start, against the time since the
previous pulse's start): spacing catches a missing or extra pulse where the trials all last
about as long, and is local, so the laptop's clock drifting from the Joulescope's over an
hour's sweep does not add up. The first pair that disagrees, or the first pulse or trial left
over, is refused in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]

_NS = 1e9


@dataclass(frozen=True, slots=True)
class Pulse:
    start_index: int  # the first sample with the line high
    end_index: int  # the first sample with it low again

    def start_s(self, rate_hz: float) -> float:
        return self.start_index / rate_hz

    def duration_s(self, rate_hz: float) -> float:
        return (self.end_index - self.start_index) / rate_hz


@dataclass(frozen=True, slots=True)
class Drop:
    """Samples [start_index, end_index) the device dropped: the marker's level there is unknown."""

    start_index: int
    end_index: int

    def describe(self, rate_hz: float) -> str:
        return (
            f"samples {self.start_index}..{self.end_index - 1} "
            f"({(self.end_index - self.start_index) / rate_hz:.6f} s at "
            f"{self.start_index / rate_hz:.6f} s)"
        )


@dataclass(frozen=True, slots=True)
class ScanState:
    """Where a scan stands after the samples before `next_index`."""

    next_index: int = 0
    level: int | None = None  # the last known sample's level; None before the first one
    rise_index: int | None = None  # the open pulse's first high sample
    high_at_start: bool = False  # the line was high at sample 0: that part is no pulse
    known_index: int | None = None  # the last known sample's index
    drop_start: int | None = None  # the first sample of a drop still open at `next_index`
    drops: tuple[Drop, ...] = ()

    def drops_within(self, first_index: int, end_index: int) -> tuple[Drop, ...]:
        """The drops touching samples [first_index, end_index]."""
        return tuple(
            d for d in self.drops if d.start_index <= end_index and d.end_index >= first_index
        )


def unpack_bits(packed: U8, length: int) -> U8:
    """pyjls's u1 samples (8 a byte, little bit order) as one 0/1 byte per sample."""
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8), bitorder="little")
    if len(bits) < length:
        raise ValueError(f"{len(packed)} packed bytes hold {len(bits)} samples, not {length}")
    return bits[:length]


def scan_bits(
    state: ScanState,
    bits: npt.NDArray[np.integer],
    first_index: int,
    dropped: npt.NDArray[np.bool_] | None = None,
) -> tuple[ScanState, tuple[Pulse, ...]]:
    """The pulses that end inside `bits` (the samples from `first_index` on, which must follow
    the previous chunk's) and the state after them; `dropped` flags the samples the device
    dropped (module doc)."""
    if first_index != state.next_index:
        raise ValueError(f"chunk starts at sample {first_index}, expected {state.next_index}")
    if len(bits) == 0:
        return state, ()
    high = np.asarray(bits) != 0
    known = np.ones(len(high), dtype=bool) if dropped is None else high | ~np.asarray(dropped)
    drop_start, drops = _drops(state, known, first_index)
    at = np.flatnonzero(known)
    end = first_index + len(high)
    if len(at) == 0:
        return replace(state, next_index=end, drop_start=drop_start, drops=drops), ()
    levels = high[at].astype(np.int8)
    at += first_index
    high_at_start = state.high_at_start
    previous = state.level
    if previous is None:
        previous = int(levels[0])
        high_at_start = previous == 1
    steps = np.diff(levels, prepend=np.int8(previous))
    # A rise follows the last known low sample, a fall is the first known low one: without a
    # drop between them both are the sample where the level changed.
    before = np.concatenate(([state.known_index if state.known_index is not None else -1], at))
    rises = before[:-1][steps == 1] + 1
    falls = at[steps == -1]
    pulses: list[Pulse] = []
    rise = state.rise_index
    if previous == 1 and len(falls):
        # The line was high coming in: the first fall closes the open pulse (none when the
        # line was high from the recording's first sample).
        if rise is not None:
            pulses.append(Pulse(rise, int(falls[0])))
        falls = falls[1:]
        rise = None
    # From here on edges alternate, a rise first: rises[k] pairs with falls[k].
    closed = len(falls)
    pulses.extend(Pulse(int(r), int(f)) for r, f in zip(rises[:closed], falls, strict=True))
    if len(rises) > closed:
        rise = int(rises[closed])
    after = ScanState(end, int(levels[-1]), rise, high_at_start, int(at[-1]), drop_start, drops)
    return after, tuple(pulses)


def _drops(
    state: ScanState, known: npt.NDArray[np.bool_], first_index: int
) -> tuple[int | None, tuple[Drop, ...]]:
    """The drop still open after this chunk, and every drop closed so far."""
    steps = np.diff(known.astype(np.int8), prepend=np.int8(state.drop_start is None))
    starts = [int(i) + first_index for i in np.flatnonzero(steps == -1)]
    ends = [int(i) + first_index for i in np.flatnonzero(steps == 1)]
    if state.drop_start is not None:
        starts.insert(0, state.drop_start)
    closed = tuple(Drop(s, e) for s, e in zip(starts, ends, strict=False))
    open_start = starts[-1] if len(starts) > len(ends) else None
    return open_start, state.drops + closed


@dataclass(frozen=True, slots=True)
class Expected:
    """One attempt of the run that ran its client (so pulsed the marker), by its own clock."""

    trial_id: str
    attempt: int
    start_ns: int  # the client's wall clock at the start (t_wall_start_ns)
    end_ns: int

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / _NS

    @property
    def name(self) -> str:
        return self.trial_id if self.attempt == 1 else f"{self.trial_id} (attempt {self.attempt})"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far a pulse may differ from its attempt: `abs_s` + `rel` x the expected value, for
    the duration and for the spacing from the previous one. The defaults leave room for a Pi's
    GPIO call latency and for the clocks' rates differing by far more than crystals do."""

    duration_abs_s: float = 0.005
    duration_rel: float = 0.02
    spacing_abs_s: float = 0.05
    spacing_rel: float = 0.01

    def duration_ok(self, expected_s: float, found_s: float) -> bool:
        return abs(found_s - expected_s) <= self.duration_abs_s + self.duration_rel * expected_s

    def spacing_ok(self, expected_s: float, found_s: float) -> bool:
        return abs(found_s - expected_s) <= self.spacing_abs_s + self.spacing_rel * abs(expected_s)


class MatchError(ValueError):
    """The pulses do not match the run's attempts; one line naming the first mismatch, and the
    samples [first_index, end_index] it concerns (where a drop may explain it)."""

    def __init__(self, message: str, first_index: int, end_index: int) -> None:
        super().__init__(message)
        self.first_index = first_index
        self.end_index = end_index


@dataclass(frozen=True, slots=True)
class Matched:
    expected: Expected
    pulse: Pulse
    number: int  # the pulse's place in the recording, from 1


def match_pulses(
    pulses: Sequence[Pulse],
    expected: Sequence[Expected],
    rate_hz: float,
    tolerance: Tolerance = Tolerance(),
) -> tuple[Matched, ...]:
    """Each attempt with its pulse, in order; MatchError at the first disagreement."""
    counts = f"{len(pulses)} pulses in the recording, {len(expected)} trials in the run"
    for i in range(min(len(pulses), len(expected))):
        pulse, trial = pulses[i], expected[i]
        at = f"pulse {i + 1} (at {pulse.start_s(rate_hz):.6f} s)"
        found = pulse.duration_s(rate_hz)
        # A drop since the previous pulse may have swallowed a pulse or merged two.
        since = pulses[i - 1].start_index if i > 0 else 0
        if not tolerance.duration_ok(trial.duration_s, found):
            raise MatchError(
                f"{at} does not match trial {trial.name}: lasts {found:.6f} s, the trial "
                f"{trial.duration_s:.6f} s ({counts})",
                since,
                pulse.end_index,
            )
        if i > 0:
            spacing_expected = (trial.start_ns - expected[i - 1].start_ns) / _NS
            spacing_found = (pulse.start_index - pulses[i - 1].start_index) / rate_hz
            if not tolerance.spacing_ok(spacing_expected, spacing_found):
                raise MatchError(
                    f"{at} does not match trial {trial.name}: starts {spacing_found:.6f} s after "
                    f"pulse {i}, the trial {spacing_expected:.6f} s after {expected[i - 1].name} "
                    f"({counts})",
                    since,
                    pulse.end_index,
                )
    if len(pulses) > len(expected):
        extra = pulses[len(expected)]
        raise MatchError(
            f"pulse {len(expected) + 1} (at {extra.start_s(rate_hz):.6f} s) has no trial: {counts}",
            extra.start_index,
            extra.end_index,
        )
    if len(expected) > len(pulses):
        # Its pulse may be anywhere after the last one found.
        after = pulses[-1].start_index if pulses else 0
        raise MatchError(
            f"trial {expected[len(pulses)].name} has no pulse: {counts}", after, sys.maxsize
        )
    return tuple(
        Matched(t, p, n) for n, (t, p) in enumerate(zip(expected, pulses, strict=True), start=1)
    )
