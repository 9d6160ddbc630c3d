"""The optimising search's rules: which measured point is best (or on the front), and whether
the point just measured needs more repetitions. Pure: points and their scores in, verdicts out;
the sampler that proposes points and the trials that measure them are the run's
(controller.sweep.optimize_run).

Every objective is minimised (energy, energy per unit of work, response time). A point's scores
are one tuple per ok trial, one score per objective; its interval per objective is the
Student-t confidence interval of their mean.

Points are told apart as analysis.pareto says (indistinct, dominated, the front). The decision a
point's measurement serves is whether it beats the points measured so far: with
one objective, the best of the others (the lowest mean); with two, each point of the others'
Pareto front (by means). A point is *indistinct* from another while their intervals overlap in
every objective: neither is better in any with confidence. A point gets `repetitions` more
trials while it is indistinct from one of those and has fewer than `max_repetitions`; at that
cap it stands on its mean (`forced`, not significant at the confidence). A point whose every
interval is already within `tolerance` of its mean (relative half-width) needs no more either:
what still overlaps it differs by less than the search was asked to tell apart, and it is tied
with it. Without that, a flat top of the landscape (many points as good as the best, the usual
case for settings that matter little) would take `max_repetitions` at every one of them. For an
energy objective the width aimed at is never below the meter's floor over the point's trials
(`floors`, analysis.detectability): no number of trials tells apart points closer than one step
held over a trial, so a point whose interval is within its floor is decided (`at_floor`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from analysis.pareto import front, indistinct
from analysis.stats import Summary, summarize
from controller.config.model import Point

Scores = tuple[float, ...]  # one trial's score per objective


@dataclass(frozen=True)
class OptimizeSpec:
    objectives: tuple[str, ...]  # one or two, each minimised
    budget: int  # most trials the search runs
    repetitions: int = 3  # trials per round at a point
    max_repetitions: int = 12  # most trials at one point
    confidence: float = 0.90
    # A point measured to within this fraction of its mean (every objective's relative CI
    # half-width) needs no more trials; 0: only max_repetitions stops a tied point.
    tolerance: float = 0.05

    def __post_init__(self) -> None:
        if len(self.objectives) not in (1, 2):
            raise ValueError(f"one or two objectives, not {len(self.objectives)}")
        if not 2 <= self.repetitions <= self.max_repetitions:
            raise ValueError(
                f"need 2 <= repetitions <= max_repetitions, not {self.repetitions}, "
                f"{self.max_repetitions}"
            )
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance {self.tolerance} must be in [0, 1)")
        if self.budget < self.repetitions:
            raise ValueError(f"budget {self.budget} is below one round of {self.repetitions}")


def summaries(scores: Sequence[Scores], spec: OptimizeSpec) -> tuple[Summary, ...]:
    """A point's interval per objective."""
    return tuple(
        summarize((trial[i] for trial in scores), spec.confidence)
        for i in range(len(spec.objectives))
    )


def rivals(point: Point, measured: Mapping[Point, Sequence[Summary]]) -> list[Point]:
    """What `point`'s measurement is decided against: the front of the other points."""
    return front({p: s for p, s in measured.items() if p != point})


def needs_more(
    point: Point,
    measured: Mapping[Point, Sequence[Summary]],
    n: int,
    spec: OptimizeSpec,
    floors: Sequence[float] = (),
) -> bool:
    """Whether `point` (measured `n` times) gets another round before the search goes on;
    `floors`: the point's meter floor per objective in its unit (none: 0)."""
    if n >= spec.max_repetitions:
        return False
    if n < spec.repetitions:
        return True
    own = measured[point]
    if precise(own, spec, floors):
        return False
    return any(indistinct(own, measured[rival]) for rival in rivals(point, measured))


def _narrow(s: Summary, width: float) -> bool:
    return math.isfinite(s.half_width) and s.half_width <= width


def precise(own: Sequence[Summary], spec: OptimizeSpec, floors: Sequence[float] = ()) -> bool:
    """Every objective's interval is within `tolerance` of its mean, or within its meter floor
    where that is wider."""
    floor = tuple(floors) or (0.0,) * len(own)
    return (spec.tolerance > 0 or any(floor)) and all(
        _narrow(s, max(spec.tolerance * abs(s.mean), f)) for s, f in zip(own, floor, strict=True)
    )


def at_floor(own: Sequence[Summary], spec: OptimizeSpec, floors: Sequence[float]) -> bool:
    """The meter's floor, not the tolerance, is why the point needs no more trials."""
    return precise(own, spec, floors) and not precise(own, spec)


def forced(
    point: Point,
    measured: Mapping[Point, Sequence[Summary]],
    n: int,
    spec: OptimizeSpec,
    floors: Sequence[float] = (),
) -> bool:
    """Stopped at `max_repetitions` still indistinct from a rival: its place is its mean's."""
    own = measured[point]
    return (
        n >= spec.max_repetitions
        and not precise(own, spec, floors)
        and any(indistinct(own, measured[rival]) for rival in rivals(point, measured))
    )
