"""A plan (`analysis.plan.RunPlan`) as the terminal shows it: a table of the points, then what
the run takes and what the plan assumed. A pure view: `render(plan)` returns a renderable."""

from __future__ import annotations

import math

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from analysis.detectability import MAX_REPETITIONS
from analysis.plan import COCHRAN_MARGIN, PointPlan, RunPlan

__all__ = ["hours_minutes", "render"]


def hours_minutes(seconds: float | None) -> str:
    """h:mm, minutes rounded up (a run of seconds is 0:01, not 0:00); "?" when not known."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    minutes = math.ceil(seconds / 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def _mj(value: float) -> str:
    """Three significant figures, written out up to a million (1440, not 1.44e+03)."""
    if not math.isfinite(value):
        return "?"
    rounded = float(f"{value:.3g}")
    return f"{rounded:.0f}" if 1000 <= abs(rounded) < 1e6 else f"{rounded:.3g}"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g} %"


def _needed(point: PointPlan) -> str:
    if point.verdict == "resolvable":
        return str(point.repetitions)
    if point.verdict == "below_meter_floor":
        return "no n"
    if point.verdict == "out_of_reach":
        return f"> {MAX_REPETITIONS}"
    return "?"


def _table(plan: RunPlan) -> Table:
    names = [name for name, _value in plan.points[0].axes] if plan.points else []
    table = Table(
        title=f"{plan.metric}: repetitions to detect {plan.detect.text} (energies in mJ)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # The figures never wrap (a number cut over two lines reads as two) and keep their width
    # on a narrow terminal; the axis names fold and the pilot column wraps at its spaces.
    for name in names:
        table.add_column(name, justify="right", overflow="fold")
    table.add_column("pilot trials")
    headings = ("mean", "sd", "detect", "floor", f"n={plan.planned_repetitions} sees", "n")
    for heading in (*headings, "trial s", "h:mm"):
        table.add_column(heading, justify="right", no_wrap=True)
    for point in plan.points:
        e = point.estimate
        n = point.repetitions
        table.add_row(
            *(str(value) for _name, value in point.axes),
            e.basis_text,
            _mj(e.mean_mj),
            _mj(e.sd_mj),
            _mj(point.detect_mj),
            _mj(point.floor.total_mj),
            _mj(point.detectable_at_planned_mj),
            _needed(point),
            "?" if e.trial_s is None else f"{e.trial_s:.3g}",
            "" if n is None else hours_minutes(point.duration_s(n)),
        )
    return table


def _points_text(points: list[PointPlan]) -> str:
    """The points' values: on one axis "name = a, b, c", on more "a=1, b=2; a=1, b=4"."""
    if points and len(points[0].axes) == 1:
        name = points[0].axes[0][0]
        return f"{name} = {', '.join(str(p.axes[0][1]) for p in points)}"
    return "; ".join(", ".join(f"{name}={value}" for name, value in p.axes) for p in points)


def _floor_text(plan: RunPlan) -> str:
    record = plan.meter.record
    basis = record.get("basis", "its resolution")
    step = f"the config's meter ({basis}), one step held over the window"
    noise = record.get("noise_mw")
    if not noise:
        return f"{step} (its record states no noise)."
    return (
        f"{step} plus its {noise:g} mW rms noise averaged over the window's samples at "
        f"{plan.meter.rate_hz:g} a second."
    )


def _lines(plan: RunPlan) -> list[str]:
    confidence = _percent(plan.confidence)
    lines = [
        f"n: repetitions per point for a two-sided Welch test at {confidence} confidence to "
        f"find the difference with {_percent(plan.power)} power, the point it is compared "
        f"with assumed as spread as this one. n={plan.planned_repetitions} sees: the least "
        "difference the config's repetitions detect so. floor: " + _floor_text(plan),
    ]
    n = plan.repetitions
    if n is None:
        lines.append("No point is resolvable: no run.repetitions detects the difference.")
    else:
        lines.append(
            f"run.repetitions = {n} resolves every resolvable point (a sweep repeats each "
            f"point as often): the run takes {hours_minutes(plan.duration_s(n))} (each point "
            f"at its own n: {hours_minutes(plan.own_duration_s)})."
        )
    lines.append(
        f"The config's run.repetitions = {plan.planned_repetitions} takes "
        f"{hours_minutes(plan.duration_s(plan.planned_repetitions))}. The study's 68 is "
        f"Cochran's formula ({plan.cochran} at {confidence} confidence and a "
        f"{_percent(COCHRAN_MARGIN)} margin), with no spread and no meter in it."
    )
    floored = [p for p in plan.points if p.verdict == "below_meter_floor"]
    if floored:
        lines.append(
            f"Cannot resolve at any n (no n): {_points_text(floored)}: the difference is "
            "within the meter's floor over their windows."
        )
    unknown = [p for p in plan.points if p.verdict == "unknown"]
    if unknown:
        lines.append(
            f"Not known (?): {_points_text(unknown)}: the pilot has fewer than two trials "
            "there, or no positive mean energy to take a percentage of."
        )
    missing = [p for p in plan.points if p.estimate.basis != "pilot"]
    if missing:
        lines.append(
            f"No pilot trials at {_points_text(missing)}: the nearest pilot point's figures "
            "stand in, or the pilot's pooled spread (the pilot column says which)."
        )
    if plan.idle_s:
        lines.append(f"Times include {plan.idle_s:g} s of idle baselines.")
    if plan.pilot_timed_by == "row timestamps":
        lines.append("Trial times are from the pilot's fetch starts (it has no trial events).")
    elif plan.pilot_timed_by == "nothing":
        lines.append("The pilot does not say how long its trials took: times are unknown.")
    if plan.differences:
        lines.append("The pilot ran otherwise than the config (its spread and times are its own):")
        lines.extend(f"  {difference}" for difference in plan.differences)
    return lines


def render(plan: RunPlan) -> RenderableType:
    return Group(_table(plan), *(Text(line) for line in _lines(plan)))
