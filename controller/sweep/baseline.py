"""The idle baseline: the client node's power while it does nothing, which `energy_above_idle_mj`
subtracts. Measured once the nodes are quiet and checked, before the first trial; and again after
the last (`[energy] idle_end`), which bounds how far it drifted during the sweep.

The rule (configs/README.md, `[energy]`), on `run.idle_baseline_s` of samples split into
`SEGMENTS` equal parts in time:

- noise: the meter's own noise (sensor, quantisation), estimated robustly from the differences
  between successive samples (their median absolute deviation / 0.6745 / sqrt 2), so that
  bursts of activity, which a plain sd would count as noise (and so widen the bound they must
  stay within), do not; from it the standard error of one part's mean, `se`;
- spread: the largest distance of a part's mean from the median of the parts' means;
- drift: the least-squares slope of the parts' means over time, times the baseline's length;
- quiet when spread and |drift| are both at most `idle_tolerance_mw` + 4 se (the 4 se keep the
  meter's noise from failing a quiet baseline; the tolerance is what activity may add).

The nodes are quiet when a baseline passes: attempts are measured back to back until one does
or `idle_wait_s` has passed since the first began. The baseline is the quiet attempt, else the
quietest one (smallest spread), marked not quiet: the sweep then warns (a notice and an
`idle_baseline_noisy` event) or, with `idle_noisy = "refuse"`, does not start.

An activity of E mJ inside a part of length L raises that part's mean by E / L: on a 5 s
baseline (1 s parts) a Python interpreter starting on the node (tens of mJ) shows as tens of mW,
far beyond a 5 mW tolerance, while the meter's noise averages down to about 3 mW per part.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from analysis.manifest import read_manifest
from controller.config.model import IDLE_SEGMENTS, Config
from controller.dashboard.state import DashboardEvent, Notice
from controller.errors import DeviceError
from controller.run.recorder import RunRecorder

SEGMENTS = IDLE_SEGMENTS
_NOISE_SES = 4.0
_MAD_PER_SD = 0.6745  # a normal variable's median absolute deviation in standard deviations

FloatArray = npt.NDArray[np.float64]


class IdleBaselineNoisy(DeviceError):
    """The nodes never became quiet enough for an idle baseline (`idle_noisy = "refuse"`)."""


class RecentPower(Protocol):
    def recent_power(self, seconds: float) -> tuple[FloatArray, FloatArray]:
        """The last `seconds` of power: meter time in s, mW."""
        ...


@dataclass(frozen=True)
class Baseline:
    """One baseline measurement and its check (see the module doc)."""

    mean_mw: float
    sd_mw: float  # of all its samples
    noise_mw: float  # the meter's noise, from successive samples' differences (robust)
    spread_mw: float
    drift_mw: float  # over the whole baseline
    duration_s: float
    samples: int
    bound_mw: float  # what spread and |drift| may reach: tolerance + 4 se
    quiet: bool

    def facts(self) -> dict[str, Any]:
        return {key: _finite(value) for key, value in asdict(self).items()}


def judge(t_s: FloatArray, power_mw: FloatArray, tolerance_mw: float) -> Baseline:
    """Check one baseline's samples (times in s, power in mW) against the rule."""
    if len(power_mw) < 2 * SEGMENTS:
        raise ValueError(f"{len(power_mw)} samples: an idle baseline needs {2 * SEGMENTS} at least")
    parts = np.array_split(np.arange(len(power_mw)), SEGMENTS)
    means = np.array([power_mw[p].mean() for p in parts])
    centres = np.array([t_s[p].mean() for p in parts])
    steps = np.diff(power_mw)
    noise = float(np.median(np.abs(steps - np.median(steps)))) / _MAD_PER_SD / math.sqrt(2)
    se = noise / math.sqrt(min(len(p) for p in parts))
    duration = float(t_s[-1] - t_s[0])
    slope = float(np.polyfit(centres, means, 1)[0]) if np.ptp(centres) > 0 else 0.0
    spread = float(np.max(np.abs(means - np.median(means))))
    drift = slope * duration
    bound = tolerance_mw + _NOISE_SES * se
    return Baseline(
        mean_mw=float(power_mw.mean()),
        sd_mw=float(power_mw.std(ddof=1)),
        noise_mw=noise,
        spread_mw=spread,
        drift_mw=drift,
        duration_s=duration,
        samples=len(power_mw),
        bound_mw=bound,
        quiet=spread <= bound and abs(drift) <= bound,
    )


@dataclass(frozen=True)
class Measured:
    """The baseline chosen, how many attempts it took, and how long the wait was."""

    baseline: Baseline
    attempts: int
    waited_s: float

    def facts(self) -> dict[str, Any]:
        return {**self.baseline.facts(), "attempts": self.attempts, "waited_s": self.waited_s}


def measure(
    meter: RecentPower,
    seconds: float,
    *,
    tolerance_mw: float,
    wait_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Measured:
    """Attempts of `seconds` each until one is quiet or `wait_s` has passed (see the module
    doc); the quiet one, else the quietest."""
    began = clock()
    attempts: list[Baseline] = []
    while True:
        sleep(seconds)
        t_s, power_mw = meter.recent_power(seconds)
        attempts.append(judge(t_s, power_mw, tolerance_mw))
        if attempts[-1].quiet or clock() - began >= wait_s:
            break
    chosen = attempts[-1] if attempts[-1].quiet else min(attempts, key=lambda b: b.spread_mw)
    return Measured(chosen, len(attempts), clock() - began - seconds)


def summary(measured: Measured, when: str) -> str:
    """One line for the dashboard."""
    b = measured.baseline
    verdict = "quiet" if b.quiet else f"NOISY (limit {b.bound_mw:.1f} mW)"
    return (
        f"idle baseline {when}: {b.mean_mw:.1f} mW, sd {b.sd_mw:.1f} mW, spread "
        f"{b.spread_mw:.1f} mW, drift {b.drift_mw:+.1f} mW; {verdict} after "
        f"{measured.attempts} attempt(s)"
    )


def end_facts(start: Mapping[str, Any], end: Measured) -> dict[str, Any]:
    """The manifest's `idle_baseline_end`: the end baseline, and how far it moved from the
    start's (`change_mw`; energy above idle is uncertain by up to that times a window)."""
    before = start.get("mean_mw")
    change = end.baseline.mean_mw - float(before) if isinstance(before, int | float) else None
    return {**end.facts(), "change_mw": change}


def before_sweep(
    meter: RecentPower,
    config: Config,
    post: Callable[[DashboardEvent], None],
    recorder: RunRecorder,
) -> Measured:
    """The baseline before the first trial; a noisy one is warned about or refused."""
    energy = config.energy
    post(
        Notice(
            f"measuring idle power for {config.run.idle_baseline_s:g} s once the nodes are quiet"
        )
    )
    measured = _measure(meter, config)
    post(Notice(summary(measured, "before the sweep")))
    if not measured.baseline.quiet:
        recorder.event("idle_baseline_noisy", when="start", **measured.facts())
        if energy.idle_noisy == "refuse":
            raise IdleBaselineNoisy(
                f"{summary(measured, 'before the sweep')}: the nodes never became quiet within "
                f'energy.idle_wait_s = {energy.idle_wait_s:g} s (energy.idle_noisy = "refuse")'
            )
    return measured


def after_sweep(
    meter: RecentPower,
    config: Config,
    post: Callable[[DashboardEvent], None],
    recorder: RunRecorder,
) -> None:
    """The baseline after the last trial, added to the manifest as `idle_baseline_end`."""
    measured = _measure(meter, config)
    manifest = read_manifest(recorder.run_dir)
    start = manifest.get("idle_baseline")
    facts = end_facts(start if isinstance(start, Mapping) else {}, measured)
    recorder.write_manifest({**manifest, "idle_baseline_end": facts})
    change = facts["change_mw"]
    moved = "" if change is None else f", {change:+.1f} mW from the start"
    post(Notice(summary(measured, "after the sweep") + moved))
    if not measured.baseline.quiet or (
        change is not None and abs(change) > measured.baseline.bound_mw
    ):
        recorder.event("idle_baseline_noisy", when="end", **facts)


def _measure(meter: RecentPower, config: Config) -> Measured:
    return measure(
        meter,
        config.run.idle_baseline_s,
        tolerance_mw=config.energy.idle_tolerance_mw,
        wait_s=config.energy.idle_wait_s,
    )


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value
