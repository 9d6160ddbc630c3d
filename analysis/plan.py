"""A plan before the run: per point of a sweep, the repetitions that detect a given difference
in energy, from a pilot run's spread, and how long the run takes. Pure: the caller hands it the
sweep's points, a pilot (`analysis.pilot`) and what the run's meter resolves (its
`meter.resolution` record and rate).

Per planned point:
- its **estimate** from the pilot: the pilot's trials at the same values of the axes the pilot
  swept (`pilot`); where the pilot has none there, its nearest point on the numeric axes, log2
  apart (`nearest`); where no pilot point shares its categories, the pilot's pooled
  within-point spread (`pooled`);
- the **difference to detect**: a fraction of the point's mean energy (`--detect 5%`) or
  millijoules (`--detect 20mJ`);
- the **meter's floor** over the point's median window at the run's meter
  (`analysis.meter_floor.floor_of`, samples = window x the meter's rate): a difference at or
  below it is resolved by no number of repetitions;
- the **repetitions**: the fewest per point at which a two-sided Welch test at the run's
  confidence finds the difference with 80 % power (`analysis.detectability`), assuming the
  point it is compared with has the same spread (the pilot says nothing of a difference's
  other side).

The run's duration is each point's repetitions x its median trial, start to start (overheads
included), plus the idle baselines. A sweep repeats every point as often (`run.repetitions`),
so the plan also says the largest n and the run at it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from analysis.detectability import (
    DEFAULT_POWER,
    MeterFloor,
    min_detectable_difference,
    repetitions_needed,
)
from analysis.errors import AnalysisError
from analysis.meter_floor import floor_of
from analysis.pilot import TRIAL_S, Pilot
from analysis.stats import cochran_sample_size

__all__ = [
    "COCHRAN_MARGIN",
    "METRICS",
    "Detect",
    "Estimate",
    "MeterAtPlan",
    "PlanError",
    "PointPlan",
    "RunPlan",
    "estimate",
    "parse_detect",
    "pilot_differences",
    "plan_run",
]

METRICS = ("energy_above_idle_mj", "energy_mj")
"""What a plan may detect a difference in: the client's energy above idle (the default), or all
of it."""

COCHRAN_MARGIN = 0.10
"""The study's margin: its 68 is Cochran's formula at 90 % confidence and this margin."""

Basis = Literal["pilot", "nearest", "pooled"]
Verdict = Literal["resolvable", "below_meter_floor", "out_of_reach", "unknown"]

_DETECT = re.compile(r"\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>%|mJ)\s*", re.IGNORECASE)


class PlanError(AnalysisError):
    """A plan's input is not usable (a `--detect` value, a pilot without the metric)."""

    exit_status = 2


@dataclass(frozen=True, slots=True)
class Detect:
    """The difference to detect: a fraction of a point's mean, or an absolute amount in mJ."""

    text: str  # as given
    fraction: float | None = None
    absolute_mj: float | None = None

    def at(self, mean_mj: float) -> float:
        """The difference in mJ at a point of mean `mean_mj`."""
        if self.absolute_mj is not None:
            return self.absolute_mj
        assert self.fraction is not None
        return self.fraction * mean_mj


def parse_detect(text: str) -> Detect:
    """`5%` (of a point's mean energy) or `20mJ`; anything else, or zero, is a PlanError."""
    match = _DETECT.fullmatch(text)
    value = float(match["number"]) if match else 0.0
    if match is None or value <= 0:
        raise PlanError(
            f"--detect {text!r}: give a positive percentage of the point's energy (5%) "
            "or millijoules (20mJ)"
        )
    if match["unit"] == "%":
        return Detect(text, fraction=value / 100)
    return Detect(text, absolute_mj=value)


@dataclass(frozen=True, slots=True)
class MeterAtPlan:
    """The run's meter as the plan needs it: a `meter.resolution` record and its sample rate."""

    record: Mapping[str, Any]
    rate_hz: float

    def floor(self, window_s: float, mean_power_mw: float | None) -> MeterFloor:
        return floor_of(self.record, window_s, round(window_s * self.rate_hz), mean_power_mw)


@dataclass(frozen=True, slots=True)
class Estimate:
    """What the pilot says of one planned point."""

    basis: Basis
    basis_text: str  # which pilot trials, in few words: "3", "3 at 1024", "6 pooled"
    n: int  # the pilot trials it rests on
    mean_mj: float  # of the plan's metric
    sd_mj: float  # within a point (pooled over pilot points where several stand for it)
    energy_mj: float  # the mean of all the client's energy, for the record
    window_s: float  # the median trial's energy window
    mean_power_mw: float | None
    trial_s: float | None  # the median trial, start to start; None: the pilot does not say


@dataclass(frozen=True, slots=True)
class PointPlan:
    axes: tuple[tuple[str, Any], ...]
    estimate: Estimate
    detect_mj: float
    floor: MeterFloor
    verdict: Verdict
    repetitions: int | None  # per point; only when resolvable
    detectable_at_planned_mj: float  # the minimum detectable difference at the config's n

    def duration_s(self, repetitions: int) -> float | None:
        trial_s = self.estimate.trial_s
        return None if trial_s is None else repetitions * trial_s

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "point": {name: _plain(value) for name, value in self.axes},
            "basis": e.basis,
            "basis_text": e.basis_text,
            "pilot_n": e.n,
            "mean_mj": _number(e.mean_mj),
            "sd_mj": _number(e.sd_mj),
            "energy_mj": _number(e.energy_mj),
            "window_s": _number(e.window_s),
            "mean_power_mw": None if e.mean_power_mw is None else _number(e.mean_power_mw),
            "trial_s": None if e.trial_s is None else _number(e.trial_s),
            "detect_mj": _number(self.detect_mj),
            "meter_floor_mj": _number(self.floor.total_mj),
            "meter_step_mj": _number(self.floor.step_mj),
            "meter_noise_mj": _number(self.floor.noise_mj),
            "verdict": self.verdict,
            "repetitions": self.repetitions,
            "detectable_at_planned_mj": _number(self.detectable_at_planned_mj),
            "duration_s": None if self.repetitions is None else self.duration_s(self.repetitions),
        }


@dataclass(frozen=True)
class RunPlan:
    metric: str
    detect: Detect
    confidence: float
    power: float
    planned_repetitions: int  # the config's run.repetitions
    meter: MeterAtPlan  # the config's
    idle_s: float  # the idle baselines the run measures besides its trials
    points: tuple[PointPlan, ...]
    differences: tuple[str, ...]  # what the pilot ran differently from the config
    pilot_timed_by: str

    @property
    def repetitions(self) -> int | None:
        """The n every point needs, a sweep repeating each as often: the largest of the
        resolvable points'; None when no point is resolvable."""
        needed = [p.repetitions for p in self.points if p.repetitions is not None]
        return max(needed) if needed else None

    @property
    def cochran(self) -> int:
        """The study's formula at this confidence: no spread and no meter in it."""
        return cochran_sample_size(self.confidence, COCHRAN_MARGIN)

    def duration_s(self, repetitions: int) -> float | None:
        """Every point at `repetitions`, plus the idle baselines; None when a point's trial
        time is not known."""
        each = [p.duration_s(repetitions) for p in self.points]
        return None if any(d is None for d in each) else self.idle_s + sum(d or 0.0 for d in each)

    @property
    def own_duration_s(self) -> float | None:
        """Each resolvable point at its own n (a sweep cannot do that yet, but it is the
        least the plan's points cost), plus the idle baselines."""
        each = [p.duration_s(p.repetitions) for p in self.points if p.repetitions is not None]
        return None if any(d is None for d in each) else self.idle_s + sum(d or 0.0 for d in each)

    def to_dict(self) -> dict[str, Any]:
        n = self.repetitions
        return {
            "metric": self.metric,
            "detect": self.detect.text,
            "confidence": self.confidence,
            "power": self.power,
            "assumption": "the point compared with has the same spread as this one",
            "repetitions": n,
            "duration_s": None if n is None else self.duration_s(n),
            "own_duration_s": self.own_duration_s,
            "planned_repetitions": self.planned_repetitions,
            "meter": {"resolution": dict(self.meter.record), "rate_hz": self.meter.rate_hz},
            "planned_duration_s": self.duration_s(self.planned_repetitions),
            "cochran_repetitions": self.cochran,
            "cochran_margin": COCHRAN_MARGIN,
            "idle_s": self.idle_s,
            "pilot_timed_by": self.pilot_timed_by,
            "pilot_differences": list(self.differences),
            "points": [p.to_dict() for p in self.points],
        }


def _number(value: float) -> float | None:
    """JSON has no NaN: an unknown figure is null."""
    return float(value) if math.isfinite(value) else None


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _distance(a: Any, b: Any) -> float:
    """How far apart two values of a numeric axis are: log2 where both are positive (the
    settings are swept in powers of two), else their difference."""
    if a > 0 and b > 0:
        return abs(math.log2(float(a)) - math.log2(float(b)))
    return abs(float(a) - float(b))


def _point_text(values: Mapping[str, Any]) -> str:
    """A pilot point in few words: its value alone on one axis, name=value on more."""
    if len(values) == 1:
        return str(_plain(next(iter(values.values()))))
    return ", ".join(f"{name}={_plain(value)}" for name, value in values.items())


def _median(rows: pd.DataFrame, column: str) -> float | None:
    if column not in rows:
        return None
    value = pd.to_numeric(rows[column], errors="coerce").median()
    return float(value) if np.isfinite(value) else None


def _within_sd(rows: pd.DataFrame, axes: Sequence[str], metric: str) -> float:
    """The spread within the pilot's points, pooled over those `rows` span: sqrt of their
    variances weighted by degrees of freedom (the between-point differences kept out)."""
    groups = rows.groupby(list(axes), sort=False)[metric] if axes else [(None, rows[metric])]
    squares = 0.0
    df = 0
    for _key, values in groups:
        n = int(values.count())
        if n >= 2:
            squares += float(values.var(ddof=1)) * (n - 1)
            df += n - 1
    return math.sqrt(squares / df) if df else math.nan


def _estimate_of(
    pilot: Pilot, rows: pd.DataFrame, metric: str, basis: Basis, text: str
) -> Estimate:
    window_s = _median(rows, "window_s")
    if window_s is None:
        first = rows["trial_id"].iloc[0]
        raise PlanError(f"{pilot.path}: trial {first} and the trials like it have no window_s")
    return Estimate(
        basis,
        text,
        len(rows),
        float(rows[metric].mean()),
        _within_sd(rows, pilot.axes, metric),
        float(rows["energy_mj"].mean()),
        window_s,
        _median(rows, "mean_power_mw"),
        _median(rows, TRIAL_S),
    )


def estimate(pilot: Pilot, point: Mapping[str, Any], metric: str) -> Estimate:
    """The pilot's trials that stand for `point` (see the module doc for which)."""
    rows = pilot.rows
    common = [axis for axis in pilot.axes if axis in point]
    pooled_text = f"{len(rows)} pooled"
    if not common:
        return _estimate_of(pilot, rows, metric, "pooled", pooled_text)
    same = np.logical_and.reduce([rows[axis] == point[axis] for axis in common])
    if same.any():
        matched = rows[same]
        return _estimate_of(pilot, matched, metric, "pilot", str(len(matched)))
    numeric = [axis for axis in common if _is_number(point[axis])]
    candidates = [
        dict(zip(common, key, strict=True))
        for key in rows[common].drop_duplicates().itertuples(index=False, name=None)
    ]
    candidates = [
        c
        for c in candidates
        if all(c[axis] == point[axis] for axis in common if axis not in numeric)
        and all(_is_number(c[axis]) for axis in numeric)
    ]
    if not candidates:
        return _estimate_of(pilot, rows, metric, "pooled", pooled_text)
    # Equally near ones (512 between 256 and 1024): the smaller values, whatever the order the
    # pilot ran them in.
    nearest = min(
        candidates,
        key=lambda c: (sum(_distance(c[a], point[a]) for a in numeric), [c[a] for a in numeric]),
    )
    matched = rows[np.logical_and.reduce([rows[axis] == nearest[axis] for axis in common])]
    text = f"{len(matched)} at {_point_text(nearest)}"
    return _estimate_of(pilot, matched, metric, "nearest", text)


def _point_plan(
    axes: tuple[tuple[str, Any], ...],
    found: Estimate,
    detect: Detect,
    meter: MeterAtPlan,
    *,
    confidence: float,
    power: float,
    planned_repetitions: int,
) -> PointPlan:
    detect_mj = detect.at(found.mean_mj)
    floor = meter.floor(found.window_s, found.mean_power_mw)
    sd = found.sd_mj
    detectable = min_detectable_difference(
        sd, planned_repetitions, sd, planned_repetitions, confidence=confidence, power=power
    )
    repetitions = None
    if not detect_mj > 0 or math.isnan(sd):
        verdict: Verdict = "unknown"
    elif detect_mj <= floor.total_mj:
        verdict = "below_meter_floor"
    else:
        repetitions = repetitions_needed(sd, sd, detect_mj, confidence, power)
        verdict = "resolvable" if repetitions is not None else "out_of_reach"
    return PointPlan(axes, found, detect_mj, floor, verdict, repetitions, detectable)


def plan_run(
    points: Sequence[Mapping[str, Any]],
    pilot: Pilot,
    detect: Detect,
    meter: MeterAtPlan,
    *,
    metric: str = METRICS[0],
    confidence: float,
    planned_repetitions: int,
    idle_s: float = 0.0,
    differences: Sequence[str] = (),
    power: float = DEFAULT_POWER,
) -> RunPlan:
    """The plan for a sweep of `points` (each axis name -> value, in the sweep's order)."""
    if metric not in METRICS:
        raise PlanError(f"--metric {metric!r}: one of {', '.join(METRICS)}")
    if metric not in pilot.rows or "energy_mj" not in pilot.rows:
        raise PlanError(f"{pilot.path}: its trials have no {metric} (no meter in the pilot?)")
    planned = tuple(
        _point_plan(
            tuple(point.items()),
            estimate(pilot, point, metric),
            detect,
            meter,
            confidence=confidence,
            power=power,
            planned_repetitions=planned_repetitions,
        )
        for point in points
    )
    return RunPlan(
        metric,
        detect,
        confidence,
        power,
        planned_repetitions,
        meter,
        idle_s,
        planned,
        tuple(differences),
        pilot.timed_by,
    )


# What a pilot may have run differently from the plan's config that changes its spread or its
# trial times: dotted keys of the manifest's config, a section meaning all of its keys.
_COMPARED = (
    "workload",
    "link",
    "energy.window",
    "run.agent",
    "nodes.client.host",
    "nodes.client.device",
    "nodes.client.engine",
    "nodes.server.engine",
    "meter.source",
    "meter.sensor",
    "meter.rate_hz",
    "meter.supply_v",
)


def _flat(config: Mapping[str, Any], dotted: str) -> dict[str, Any]:
    node: Any = config
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    if isinstance(node, Mapping):
        return {f"{dotted}.{key}": value for key, value in node.items()}
    return {dotted: node}


def pilot_differences(
    pilot_config: Mapping[str, Any], config: Mapping[str, Any], swept: Sequence[str]
) -> tuple[str, ...]:
    """`key: pilot value -> config value` for each compared key the two configs (as a
    manifest records them) set apart, but the swept ones."""
    found = []
    for dotted in _COMPARED:
        ours, theirs = _flat(config, dotted), _flat(pilot_config, dotted)
        for key in ours.keys() | theirs.keys():
            if key.rsplit(".", 1)[-1] in swept or ours.get(key) == theirs.get(key):
                continue
            found.append(f"{key}: {theirs.get(key)!r} in the pilot, {ours.get(key)!r} here")
    return tuple(sorted(found))
