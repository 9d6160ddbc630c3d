"""The reference study's published findings, checked against a run as *shapes*.

The study (two Raspberry Pi 3B, nghttp2, a ~7 MB page, 68 fetches per window) found: response
time and CPU time fall as SETTINGS_INITIAL_WINDOW_SIZE grows; at 4096 B vs 65535 B the client's
CPU time is +42 % and its response time +300 %; server CPU time 427 ms and response time 627 ms at
65535; client work settles near 120 mJ from 4096 B up (the study does not say whether above
idle, so both energies are checked); CPU % is flat up to 4096 B, then rises
(client about 60 %, server about 26 % at 65535). Absolute values depend on the hardware, so the
verdicts judge direction and shape; the numbers stand next to each other for the reader. Beside
the client energy, when the caller passes a replay (analysis.study_meter), what the study's own
meter would have reported for this run's trials, and how much of the gap it explains.

Each finding that sets two windows' means against each other (4096 vs 65535; energy's settling
by the same two) also says whether that difference is one the run could see
(`Check.resolvability`, analysis.detectability): above its minimum detectable difference and, for
energy, the meter's floor, else the repetitions it would need or that none would do.

Definitions used by the verdicts:
- knee: the smallest window from which every mean stays within `SETTLE_TOLERANCE` of the mean at
  the largest window;
- flat: (max - min) of the means up to 4096 B is at most `FLAT_TOLERANCE` x their average;
  with a single window up to 4096 B flatness is not judged, only the rise (a run of 4096 and
  65535 alone: "n/a" when CPU % rises, "differs" when it does not);
- an increase (mean at 4096 over mean at 65535, minus 1) carries a confidence interval from the
  delta method on the log of the ratio of the two means (so it stays positive), with Student's
  t at Welch-Satterthwaite degrees of freedom (the two points' variances are not assumed
  equal, and n is small: 5 per point in the embedded default, where a normal quantile would
  make the interval too narrow). It "holds" when its CI excludes zero;
- a relative effect the study quantified (response time +300 %, CPU time +42 %) is judged on
  magnitude as well as direction: "agrees" when the run's CI excludes zero on the study's side
  and either contains the study's value or puts the run's effect within `MAGNITUDE_FACTOR` of
  it (a tight CI around +299 % agrees with +300 %); "same direction" when it excludes zero on
  that side but the effect is further from the study's (the text says how many times the
  study's effect it is: "same direction, 7.1x the study's effect"); "inconclusive" when the CI
  contains both zero and the study's value; "differs" otherwise (the opposite direction, or no
  change where the study found one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats as _scipy_stats

from analysis.columns import WINDOW_AXIS
from analysis.detectability import Resolvability
from analysis.points import divided, metric_rows, row_resolvability
from analysis.stats import t_quantile_df
from analysis.study_meter import ENERGY_STUDY_METER, READINGS, SKETCH, Replayed

Verdict = Literal["agrees", "same direction", "inconclusive", "differs", "n/a", "info"]

LOW_WINDOW, HIGH_WINDOW = 4096, 65535
STUDY_CLIENT_CPU_INCREASE = 0.42
STUDY_CLIENT_RESPONSE_INCREASE = 3.00
STUDY_SERVER_CPU_S, STUDY_SERVER_RESPONSE_S = 0.427, 0.627
STUDY_CLIENT_ENERGY_MJ = 120.0
STUDY_CLIENT_CPU_PCT, STUDY_SERVER_CPU_PCT = 60.0, 26.0
SETTLE_TOLERANCE = 0.10
MAGNITUDE_FACTOR = 1.5  # an effect from 1/1.5 to 1.5 times the study's is the study's size
FLAT_TOLERANCE = 0.25
_SAME_WINDOW_LOG2 = 0.01  # 65535 and 65536 (or 4095 and 4096) are the same point of the sweep


@dataclass(frozen=True)
class Check:
    finding: str
    study: str
    measured: str
    verdict: Verdict
    series: str = ""  # the other swept settings' values, "" when the window is the only axis
    # The difference between the two points the finding compares, against what the run's n and
    # (for energy) its meter can see; None for a finding that compares no two points.
    resolvability: Resolvability | None = None
    unit: str = ""  # the difference's

    @property
    def resolvable(self) -> str:
        return "" if self.resolvability is None else self.resolvability.text(self.unit)


@dataclass(frozen=True)
class Increase:
    """m_low / m_high - 1 with its CI (NaN when a side has fewer than 2 values): delta method
    on the log of the ratio, Student t at Welch-Satterthwaite `df` (see the module doc)."""

    relative: float
    ci_low: float
    ci_high: float
    df: float = math.nan
    confidence: float = math.nan

    @property
    def holds(self) -> bool:
        return self.relative > 0 and (math.isnan(self.ci_low) or self.ci_low > 0)

    def text(self) -> str:
        if math.isnan(self.ci_low):
            return percent(self.relative)
        level = "" if math.isnan(self.confidence) else f"{self.confidence * 100:g} % "
        df = "inf" if math.isinf(self.df) else f"{self.df:.1f}"
        return (
            f"{percent(self.relative)} ({level}CI {percent(self.ci_low)} .. "
            f"{percent(self.ci_high)}; t, Welch df {df})"
        )


def percent(fraction: float, sign: bool = True) -> str:
    """A fraction as whole percent, "+42 %"; rounding first, so a tiny negative is "+0 %"."""
    value = round(fraction * 100) + 0
    return f"{value:+d} %" if sign else f"{value:d} %"


def knee(windows: Sequence[int], means: Sequence[float], tolerance: float) -> int | None:
    """The smallest window from which every mean is within `tolerance` of the last one."""
    if not windows or math.isnan(means[-1]):
        return None
    final = means[-1]
    result = windows[-1]
    for window, mean in zip(reversed(windows), reversed(means), strict=True):
        if math.isnan(mean) or abs(mean - final) > tolerance * abs(final):
            break
        result = window
    return result


def increase(low: pd.Series, high: pd.Series, confidence: float) -> Increase:
    """Relative increase of the mean at `low` over the mean at `high` (rows of the summary)."""
    m1, m2 = float(low["mean"]), float(high["mean"])
    ratio = m1 / m2
    if low["n"] < 2 or high["n"] < 2 or m1 <= 0 or m2 <= 0:
        return Increase(ratio - 1, math.nan, math.nan)
    # Squared relative standard errors of the two means: var(log m) ~ sd^2 / (n m^2).
    a1 = float(low["sd"]) ** 2 / (float(low["n"]) * m1**2)
    a2 = float(high["sd"]) ** 2 / (float(high["n"]) * m2**2)
    if a1 + a2 == 0:
        return Increase(ratio - 1, ratio - 1, ratio - 1, math.inf, confidence)
    df = (a1 + a2) ** 2 / (a1**2 / (float(low["n"]) - 1) + a2**2 / (float(high["n"]) - 1))
    half = t_quantile_df(confidence, df) * math.sqrt(a1 + a2)
    return Increase(
        ratio - 1, ratio * math.exp(-half) - 1, ratio * math.exp(half) - 1, df, confidence
    )


def magnitude(change: Increase, study: float) -> tuple[Verdict, str]:
    """Direction and size of a run's relative effect against the study's (module doc)."""
    factor = change.relative / study if study else math.nan
    times = f"{factor:.2g}x the study's effect" if math.isfinite(factor) else ""
    if math.isnan(change.ci_low):
        same = change.relative * study > 0
        return "n/a", f"{'same' if same else 'opposite'} direction, {times} (no CI: n < 2)"
    above, below = change.ci_low > 0, change.ci_high < 0
    contains_study = change.ci_low <= study <= change.ci_high
    if (above and study > 0) or (below and study < 0):
        if contains_study or 1 / MAGNITUDE_FACTOR <= factor <= MAGNITUDE_FACTOR:
            return "agrees", f"same direction and size ({times})"
        return "same direction", f"same direction, {times}"
    if above or below:
        return "differs", f"opposite direction ({times})"
    if contains_study:
        return "inconclusive", "no clear change; the study's effect lies within the CI"
    return "differs", f"no clear change where the study found {percent(study)}"


def _near(rows: pd.DataFrame, window: int) -> pd.Series | None:
    distance = np.abs(np.log2(rows[WINDOW_AXIS].to_numpy(dtype=np.float64) / window))
    if distance.size == 0 or distance.min() > _SAME_WINDOW_LOG2:
        return None
    row = rows.iloc[int(distance.argmin())]
    return None if row["n"] == 0 else row


def _series(summary: pd.DataFrame, metric: str, axes: Sequence[str]) -> dict[str, pd.DataFrame]:
    rows = metric_rows(summary, metric)
    rows = rows[rows["n"] > 0]
    others = [a for a in axes if a != WINDOW_AXIS]
    if not others:
        return {"": rows.sort_values(WINDOW_AXIS)}
    series: dict[str, pd.DataFrame] = {}
    for key, group in rows.groupby(others, sort=True):
        values = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{a} = {v}" for a, v in zip(others, values, strict=True))
        series[label] = group.sort_values(WINDOW_AXIS)
    return series


def _falls(rows: pd.DataFrame, label: str, unit: str, series: str) -> Check:
    finding = f"{label} falls as the window grows"
    if len(rows) < 2:
        return Check(finding, "falls", "fewer than 2 windows", "n/a", series)
    windows, means = rows[WINDOW_AXIS].tolist(), rows["mean"].tolist()
    falls = means[-1] < means[0]
    measured = f"{means[0]:.3g} {unit} at {windows[0]} -> {means[-1]:.3g} {unit} at {windows[-1]}"
    if len(rows) >= 3:
        rho = float(_scipy_stats.spearmanr(windows, means).statistic)
        measured += f"; Spearman rho {rho:+.2f}"
        falls = falls and rho < 0
    return Check(finding, "falls", measured, "agrees" if falls else "differs", series)


def _increase_check(
    rows: pd.DataFrame, label: str, study: float, confidence: float, series: str, *, unit: str
) -> Check:
    finding = f"{label} at {LOW_WINDOW} vs {HIGH_WINDOW}"
    shown = percent(study)
    low, high = _near(rows, LOW_WINDOW), _near(rows, HIGH_WINDOW)
    if low is None or high is None:
        return Check(finding, shown, f"needs windows {LOW_WINDOW} and {HIGH_WINDOW}", "n/a", series)
    change = increase(low, high, confidence)
    verdict, judged = magnitude(change, study)
    resolvable = row_resolvability(high, low, confidence)
    return Check(finding, shown, f"{change.text()}: {judged}", verdict, series, resolvable, unit)


def _knee_check(rows: pd.DataFrame, series: str) -> Check:
    finding = "knee of the client response time"
    study = f"above {LOW_WINDOW} (still +300 % there)"
    point = knee(rows[WINDOW_AXIS].tolist(), rows["mean"].tolist(), SETTLE_TOLERANCE)
    if point is None or len(rows) < 2:
        return Check(finding, study, "fewer than 2 windows", "n/a", series)
    return Check(
        finding,
        study,
        f"{point} B (from there within {percent(SETTLE_TOLERANCE, sign=False)} of the largest)",
        "info",
        series,
    )


def _server_check(rows: pd.DataFrame, label: str, study_s: float, series: str) -> Check:
    finding = f"{label} at {HIGH_WINDOW}"
    high = _near(rows, HIGH_WINDOW)
    study = f"{study_s * 1e3:.0f} ms"
    if high is None:
        return Check(finding, study, f"needs window {HIGH_WINDOW}", "n/a", series)
    measured = f"{high['mean'] * 1e3:.0f} ms"
    if not math.isnan(high["ci_low"]):
        measured += f" (CI {high['ci_low'] * 1e3:.0f} .. {high['ci_high'] * 1e3:.0f})"
    return Check(finding, study, measured, "info", series)


def _energy_check(rows: pd.DataFrame, label: str, series: str) -> Check:
    finding = f"{label} settles from {LOW_WINDOW} up"
    study = f"near {STUDY_CLIENT_ENERGY_MJ:.0f} mJ from {LOW_WINDOW}"
    if rows.empty:
        return Check(finding, study, "no energy values in this run", "n/a", series)
    if len(rows) < 2 or _near(rows, HIGH_WINDOW) is None:
        return Check(finding, study, f"needs window {HIGH_WINDOW} and another", "n/a", series)
    point = knee(rows[WINDOW_AXIS].tolist(), rows["mean"].tolist(), SETTLE_TOLERANCE)
    settled = rows[rows[WINDOW_AXIS] >= LOW_WINDOW]["mean"]
    high = _near(rows, HIGH_WINDOW)
    scale = "" if high is None else f"; {high['mean'] / STUDY_CLIENT_ENERGY_MJ:.2g}x the study's"
    measured = (
        f"knee at {point} B; {settled.min():.0f} .. {settled.max():.0f} mJ from {LOW_WINDOW} up"
        f"{scale} at {HIGH_WINDOW} (absolute values depend on the hardware)"
    )
    ok = point is not None and point <= LOW_WINDOW
    low = _near(rows, LOW_WINDOW)
    resolvable = None if low is None or high is None else row_resolvability(high, low)
    return Check(finding, study, measured, "agrees" if ok else "differs", series, resolvable, "mJ")


def _study_meter_check(
    ours: pd.DataFrame,
    meter: pd.DataFrame | None,
    readings: pd.DataFrame | None,
    unavailable: str,
    series: str,
) -> Check:
    """The client energy at the largest window as the study's meter would have reported it
    (`meter`: its summary rows, analysis.study_meter; `readings`: how many readings a window
    holds), beside ours and the study's: how much
    of the gap (ours over the study's) the meter accounts for, as a factor and as a share on
    a log scale (the factors multiply)."""
    finding = f"client energy through the study's meter at {HIGH_WINDOW}"
    study = f"near {STUDY_CLIENT_ENERGY_MJ:.0f} mJ"
    if unavailable:
        return Check(finding, study, unavailable, "n/a", series)
    mine = _near(ours, HIGH_WINDOW)
    replayed = None if meter is None else _near(meter, HIGH_WINDOW)
    if mine is None or replayed is None:
        needs = f"needs window {HIGH_WINDOW} with a replayable trace"
        return Check(finding, study, needs, "n/a", series)
    ours_mj, meter_mj = float(mine["mean"]), float(replayed["mean"])
    gap, reads = ours_mj / STUDY_CLIENT_ENERGY_MJ, meter_mj / ours_mj
    if gap > 1 and 0 < reads < 1:
        share = min(math.log(1 / reads) / math.log(gap), 1.0)
        explains = (
            f"the study's meter explains {1 / reads:.2g}x of the {gap:.2g}x gap "
            f"({percent(share, sign=False)} of it on a log scale), {gap * reads:.2g}x remains"
        )
    else:
        explains = (
            f"the study's meter does not narrow the gap: ours is {gap:.2g}x the study's, "
            f"the replay {gap * reads:.2g}x"
        )
    measured = (
        f"{meter_mj:.0f} mJ replayed vs {ours_mj:.0f} mJ measured (the sketch's 0.707 x, 5 V, "
        f"10-bit ADC, a 100-read burst every {SKETCH.period_s * 1e3:.0f} ms, on each trial's "
        f"trace: {reads:.2g}x ours); {explains}"
    )
    held = None if readings is None else _near(readings, HIGH_WINDOW)
    if held is not None and held["mean"] < 1:
        measured += (
            f"; a window here holds {held['mean']:.2g} readings on average, so the sketch "
            "read such a process only in that share of its runs (the replay: the expectation "
            "over the phases that read it)"
        )
    return Check(finding, study, measured, "info", series)


def _cpu_pct_check(
    rows: pd.DataFrame,
    side: str,
    study_pct: float,
    confidence: float,
    series: str,
    *,
    core_fraction: float | None,
) -> Check:
    """`core_fraction`: the emulated core's share of the host's (its CPU quota), whose CPU % the
    study's Pi numbers compare with; None for a node that is its own hardware."""
    finding = f"{side} CPU % flat up to {LOW_WINDOW}, then rising"
    study = f"flat, then about {study_pct:.0f} % at {HIGH_WINDOW}"
    of = ""
    if core_fraction:
        rows = divided(rows, core_fraction)
        of = f"of the emulated core (quota {core_fraction:.3g}): "
    low, high = _near(rows, LOW_WINDOW), _near(rows, HIGH_WINDOW)
    if low is None or high is None:
        return Check(finding, study, f"needs windows {LOW_WINDOW} and {HIGH_WINDOW}", "n/a", series)
    rising = increase(high, low, confidence)
    rise = f"{high['mean']:.0f} % at {HIGH_WINDOW} ({rising.text()} over {LOW_WINDOW})"
    resolvable = row_resolvability(low, high)
    flat_part = rows[rows[WINDOW_AXIS] <= LOW_WINDOW]["mean"]
    if len(flat_part) < 2:
        # Flatness takes two windows up to 4096; the rise is still judged: a CPU % that does
        # not rise differs from the study whatever the smaller windows would show.
        measured = of + (
            f"{low['mean']:.0f} % at {LOW_WINDOW}, {rise}; flat not judged: it needs two "
            f"windows up to {LOW_WINDOW}, the run has one"
        )
        partial: Verdict = "n/a" if rising.holds else "differs"
        return Check(finding, study, measured, partial, series, resolvable, "%")
    spread = (flat_part.max() - flat_part.min()) / abs(flat_part.mean())
    flat = spread <= FLAT_TOLERANCE
    measured = of + (
        f"{flat_part.min():.0f} .. {flat_part.max():.0f} % up to {LOW_WINDOW} "
        f"(spread {percent(spread, sign=False)}), {rise}"
    )
    verdict: Verdict = "agrees" if flat and rising.holds else "differs"
    return Check(finding, study, measured, verdict, series, resolvable, "%")


def study_checks(
    summary: pd.DataFrame,
    axes: Sequence[str],
    confidence: float,
    core_fractions: Mapping[str, float] | None = None,
    replayed: Replayed | None = None,
) -> list[Check]:
    """Every published finding, per combination of the other swept settings; CPU % of an
    emulated node (`core_fractions[side]`, its quota) against its emulated core; with
    `replayed` (analysis.study_meter.replay_run), the client energy the study's meter would
    have reported beside it."""
    fractions = core_fractions or {}
    if WINDOW_AXIS not in axes:
        return [
            Check("every finding", "window sweep", f"the run does not sweep {WINDOW_AXIS}", "n/a")
        ]
    checks: list[Check] = []
    meter, readings = (
        ({}, {})
        if replayed is None or replayed.unavailable
        else (
            _series(replayed.rows, ENERGY_STUDY_METER, axes),
            _series(replayed.rows, READINGS, axes),
        )
    )
    response = _series(summary, "client_response_s", axes)
    for series, rows in response.items():
        checks.append(_falls(rows, "client response time", "s", series))
        checks.append(_knee_check(rows, series))
        checks.append(
            _increase_check(
                rows,
                "client response time",
                STUDY_CLIENT_RESPONSE_INCREASE,
                confidence,
                series,
                unit="s",
            )
        )
    for series, rows in _series(summary, "client_cpu_s", axes).items():
        checks.append(_falls(rows, "client CPU time", "s", series))
        checks.append(
            _increase_check(
                rows, "client CPU time", STUDY_CLIENT_CPU_INCREASE, confidence, series, unit="s"
            )
        )
    for series, rows in _series(summary, "server_cpu_s", axes).items():
        checks.append(_server_check(rows, "server CPU time", STUDY_SERVER_CPU_S, series))
    for series, rows in _series(summary, "server_serve_s", axes).items():
        checks.append(_server_check(rows, "server response time", STUDY_SERVER_RESPONSE_S, series))
    for metric, label in (
        ("energy_mj", "client energy"),
        ("energy_above_idle_mj", "client energy above idle"),
    ):
        for series, rows in _series(summary, metric, axes).items():
            checks.append(_energy_check(rows, label, series))
            if replayed is not None and metric == "energy_mj":
                unavailable = replayed.unavailable
                checks.append(
                    _study_meter_check(
                        rows, meter.get(series), readings.get(series), unavailable, series
                    )
                )
    for side, study_pct in (("client", STUDY_CLIENT_CPU_PCT), ("server", STUDY_SERVER_CPU_PCT)):
        for series, rows in _series(summary, f"{side}_cpu_pct", axes).items():
            checks.append(
                _cpu_pct_check(
                    rows, side, study_pct, confidence, series, core_fraction=fractions.get(side)
                )
            )
    return checks
