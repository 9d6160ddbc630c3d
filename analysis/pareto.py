"""Telling measured points apart, for an optimizing search's decisions (controller.sweep.optimize)
and its report (analysis.optimize) alike: each point has a t-interval per objective, and every
objective is minimised.

Two points are *indistinct* while their intervals overlap in every objective (neither is better
in any with confidence; an interval not yet known, from one trial, separates nothing). One
*dominates* another when its means are no worse in every objective and better in one; the
*front* is the points none dominates (with one objective: those of the lowest mean).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from analysis.stats import Summary

P = TypeVar("P", bound=Hashable)


def overlap(a: Summary, b: Summary) -> bool:
    if not all(math.isfinite(v) for v in (a.ci_low, a.ci_high, b.ci_low, b.ci_high)):
        return True
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high


def indistinct(a: Sequence[Summary], b: Sequence[Summary]) -> bool:
    return all(overlap(x, y) for x, y in zip(a, b, strict=True))


def dominates(a: Sequence[Summary], b: Sequence[Summary]) -> bool:
    pairs = list(zip(a, b, strict=True))
    return all(x.mean <= y.mean for x, y in pairs) and any(x.mean < y.mean for x, y in pairs)


def front(measured: Mapping[P, Sequence[Summary]]) -> list[P]:
    """The points no other dominates by means, in the mapping's order."""
    return [
        point
        for point, own in measured.items()
        if not any(dominates(other, own) for p, other in measured.items() if p != point)
    ]


def tied(best: P, measured: Mapping[P, Sequence[Summary]]) -> list[P]:
    """The other points indistinct from `best`: as good as far as the intervals can tell."""
    return [p for p, s in measured.items() if p != best and indistinct(s, measured[best])]


def best(measured: Mapping[P, Sequence[Summary]]) -> list[P]:
    """One objective: the point of the lowest mean (the first of equals); two: the front."""
    if not measured:
        return []
    if len(next(iter(measured.values()))) == 1:
        return [min(measured, key=lambda p: measured[p][0].mean)]
    return front(measured)
