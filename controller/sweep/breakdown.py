"""The breakdown search's planner: where a metric falls through a threshold as one parameter grows.
Pure: a state machine that takes trial results and says the next probe.

The question (issue 14's, the stream workload's): at which payload does the received rate fall
below 75 % of the demanded rate? Generically: over a parameter `x` in [low, high], each trial
yields a *score* (say received / demanded rate), assumed to fall as `x` grows; a value of `x`
*passes* while its scores hold the threshold (at least it, or at most it for a metric that grows:
`holds`). The search brackets the largest passing `x`:

1. Probe `low`. Failing there, the breakdown is below the range (`below_low`), done.
2. Probe `high`. Passing there, it is above the range (`above_high`), done.
3. Bisect over log `x` (the geometric midpoint of the last passing and the first failing probe)
   until failing / passing <= `resolution`, or no integer lies between them.

Each probe is decided by a Student-t confidence interval of its scores' mean, judged after every
`repetitions` trials: the whole interval on the passing side passes, on the failing side fails;
an interval holding the threshold asks `repetitions` more trials, up to `max_repetitions`, where
the mean alone decides and the probe is marked `forced` (its verdict is not significant at the
confidence). The result is the bracket [last passing, first failing] with the interval at each.

Every decision is correct whenever all of a probe's scores lie on the true side of the threshold
(a mean of values on one side cannot be on the other, nor can a CI that excludes the threshold),
so with noise bounded by e the bracket always overlaps [x where the curve is threshold + e,
x where it is threshold - e]; tests/controller/test_breakdown.py checks that with hypothesis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Literal

from analysis.stats import Summary, summarize

Holds = Literal["at_least", "at_most"]
HOLDS: tuple[Holds, ...] = ("at_least", "at_most")


@dataclass(frozen=True)
class SearchSpec:
    low: float  # the range searched, 0 < low < high
    high: float
    threshold: float  # a probe passes while its scores hold this
    holds: Holds = "at_least"  # scores >= threshold pass ("at_most": scores <= threshold)
    repetitions: int = 3  # trials per round at a probe
    max_repetitions: int = 12  # most trials at one probe; then the mean decides
    resolution: float = 1.25  # done when failing / passing <= this
    confidence: float = 0.90
    integer: bool = True  # probes are whole numbers (a count of doubles)

    def __post_init__(self) -> None:
        if not 0 < self.low < self.high:
            raise ValueError(f"need 0 < low < high, not low {self.low}, high {self.high}")
        if self.integer and self.low != int(self.low):
            raise ValueError(f"low {self.low} is not a whole number")
        if self.integer and self.high != int(self.high):
            raise ValueError(f"high {self.high} is not a whole number")
        if not 1 <= self.repetitions <= self.max_repetitions:
            raise ValueError(
                f"need 1 <= repetitions <= max_repetitions, not {self.repetitions}, "
                f"{self.max_repetitions}"
            )
        if not self.resolution > 1:
            raise ValueError(f"resolution {self.resolution} must be above 1")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence {self.confidence} must be between 0 and 1")

    def max_probes(self) -> int:
        """At most this many probes: the two ends, then halving log(high / low) until it is
        within log(resolution)."""
        halvings = math.ceil(math.log2(math.log(self.high / self.low) / math.log(self.resolution)))
        return 2 + max(halvings, 0)


class Verdict(Enum):
    PASS = "pass"
    FAIL = "fail"
    MORE = "more"  # the interval holds the threshold: another round of trials


class Phase(Enum):
    CHECK_LOW = "check_low"
    CHECK_HIGH = "check_high"
    BISECT = "bisect"
    DONE = "done"


Status = Literal["found", "below_low", "above_high"]

# (phase, verdict of its probe) -> next phase; anything else is not a transition.
_TRANSITIONS: dict[tuple[Phase, Verdict], Phase] = {
    (Phase.CHECK_LOW, Verdict.PASS): Phase.CHECK_HIGH,
    (Phase.CHECK_LOW, Verdict.FAIL): Phase.DONE,
    (Phase.CHECK_HIGH, Verdict.PASS): Phase.DONE,
    (Phase.CHECK_HIGH, Verdict.FAIL): Phase.BISECT,
    (Phase.BISECT, Verdict.PASS): Phase.BISECT,
    (Phase.BISECT, Verdict.FAIL): Phase.BISECT,
}


@dataclass(frozen=True)
class Probe:
    """One decided probe: its value, its scores, their interval and what it said."""

    index: int  # from 1, in the order probed
    value: float
    scores: tuple[float, ...]
    summary: Summary
    verdict: Verdict  # PASS or FAIL
    forced: bool  # decided by the mean alone at max_repetitions: not significant
    unfinished: bool = False  # FAIL because a trial could not finish (`fail_probe`)


@dataclass(frozen=True)
class Ask:
    """Run `trials` more trials at `value` (probe `probe`), then feed their scores."""

    probe: int
    value: float
    trials: int


@dataclass(frozen=True)
class Breakdown:
    status: Status
    passing: Probe | None  # the last passing probe (None: below_low)
    failing: Probe | None  # the first failing probe above it (None: above_high)
    probes: tuple[Probe, ...]

    @property
    def estimate(self) -> float:
        """The breakdown value: the bracket's geometric middle (an end when it is open)."""
        if self.passing is None:
            assert self.failing is not None
            return self.failing.value
        if self.failing is None:
            return self.passing.value
        return math.sqrt(self.passing.value * self.failing.value)

    @property
    def trials(self) -> int:
        return sum(len(probe.scores) for probe in self.probes)


def value_text(value: float) -> str:
    """A probe's value as written in logs and breakdown.csv: whole numbers in full."""
    return str(int(value)) if math.isfinite(value) and value == int(value) else f"{value:.6g}"


def judge(scores: Sequence[float], spec: SearchSpec) -> tuple[Verdict, Summary, bool]:
    """A probe's verdict on its scores so far (judged when a round is complete), its summary,
    and whether the mean alone decided it."""
    summary = summarize(scores, spec.confidence)
    sign = 1.0 if spec.holds == "at_least" else -1.0
    # On the "at_least" scale: higher is better.
    low, high = sorted((sign * summary.ci_low, sign * summary.ci_high))
    threshold = sign * spec.threshold
    if summary.n >= 2 and low >= threshold:
        return Verdict.PASS, summary, False
    if summary.n >= 2 and high < threshold:
        return Verdict.FAIL, summary, False
    if summary.n < spec.max_repetitions:
        return Verdict.MORE, summary, False
    verdict = Verdict.PASS if sign * summary.mean >= threshold else Verdict.FAIL
    return verdict, summary, True


def _midpoint(spec: SearchSpec, passing: float, failing: float) -> float | None:
    """The next probe between the bracket's ends, or None when the bracket is narrow enough."""
    if failing / passing <= spec.resolution:
        return None
    middle = math.sqrt(passing * failing)
    if not spec.integer:
        return middle
    rounded = float(round(middle))
    return rounded if passing < rounded < failing else None


@dataclass(frozen=True)
class SearchState:
    spec: SearchSpec
    phase: Phase
    value: float  # the open probe's value (meaningless once DONE)
    scores: tuple[float, ...]  # the open probe's scores so far
    probes: tuple[Probe, ...]  # decided, in order
    passing: Probe | None
    failing: Probe | None

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def ask(self) -> Ask | None:
        """What to run next; None once the search is done."""
        if self.done:
            return None
        spec = self.spec
        # Up to the end of the current round (a partial round: a run resumed mid-round).
        due = spec.repetitions - len(self.scores) % spec.repetitions
        due = min(due, spec.max_repetitions - len(self.scores))
        return Ask(len(self.probes) + 1, self.value, due)

    def feed(self, score: float) -> SearchState:
        """The state after one more trial's score at the open probe."""
        if self.done:
            raise ValueError("the search is done: no probe is open")
        if not math.isfinite(score):
            raise ValueError(f"score {score} is not a finite number")
        scores = (*self.scores, score)
        spec = self.spec
        if len(scores) % spec.repetitions and len(scores) < spec.max_repetitions:
            return replace(self, scores=scores)
        verdict, summary, forced = judge(scores, spec)
        if verdict is Verdict.MORE:
            return replace(self, scores=scores)
        probe = Probe(len(self.probes) + 1, self.value, scores, summary, verdict, forced)
        return self._after(probe)

    def fail_probe(self) -> SearchState:
        """The state after a trial at the open probe could not finish at all (a stream whose
        items never all arrive before the trial's timeout): the probe fails, on the scores it
        has so far."""
        if self.done:
            raise ValueError("the search is done: no probe is open")
        summary = summarize(self.scores, self.spec.confidence)
        probe = Probe(
            len(self.probes) + 1, self.value, self.scores, summary, Verdict.FAIL, False, True
        )
        return self._after(probe)

    def _after(self, probe: Probe) -> SearchState:
        phase = _TRANSITIONS[(self.phase, probe.verdict)]
        passing = probe if probe.verdict is Verdict.PASS else self.passing
        failing = probe if probe.verdict is Verdict.FAIL else self.failing
        value = self.spec.high if phase is Phase.CHECK_HIGH else math.nan
        if phase is Phase.BISECT:
            assert passing is not None and failing is not None
            middle = _midpoint(self.spec, passing.value, failing.value)
            if middle is None:
                phase = Phase.DONE
            else:
                value = middle
        return SearchState(self.spec, phase, value, (), (*self.probes, probe), passing, failing)

    def result(self) -> Breakdown:
        if not self.done:
            raise ValueError("the search is not done yet")
        if self.passing is None:
            status: Status = "below_low"
        elif self.failing is None:
            status = "above_high"
        else:
            status = "found"
        return Breakdown(status, self.passing, self.failing, self.probes)


def start(spec: SearchSpec) -> SearchState:
    return SearchState(spec, Phase.CHECK_LOW, spec.low, (), (), None, None)
