"""The idle baseline: judged quiet or noisy by its documented rule, measured until quiet."""

from __future__ import annotations

import numpy as np
import pytest

from controller.sweep.baseline import Measured, end_facts, judge, measure

RATE_HZ = 1000


def _quiet(seconds: float = 5.0, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A board at 1200 mW seen through a meter with 120 mW of noise (the virtual ACS712's)."""
    t = np.arange(int(seconds * RATE_HZ)) / RATE_HZ
    return t, 1200.0 + np.random.default_rng(seed).normal(0.0, 120.0, len(t))


def test_meter_noise_alone_is_quiet_and_reported() -> None:
    t, p = _quiet()
    baseline = judge(t, p, tolerance_mw=5.0)
    assert baseline.quiet
    assert baseline.mean_mw == pytest.approx(1200.0, abs=10)
    assert baseline.sd_mw == pytest.approx(120.0, rel=0.05)
    assert baseline.noise_mw == pytest.approx(120.0, rel=0.05)
    assert baseline.bound_mw == pytest.approx(5.0 + 4 * 120.0 / np.sqrt(1000), rel=0.05)


def test_an_interpreter_starting_on_the_node_makes_it_noisy() -> None:
    """50 ms of one busy Pi core (687.5 mW above idle) in one second of five: +34 mW there."""
    t, p = _quiet()
    p[2100:2150] += 687.5
    baseline = judge(t, p, tolerance_mw=5.0)
    assert not baseline.quiet
    assert baseline.spread_mw > baseline.bound_mw


def test_a_drifting_baseline_is_noisy() -> None:
    t, p = _quiet()
    baseline = judge(t, p + 8.0 * t, tolerance_mw=5.0)  # +40 mW over the five seconds
    assert baseline.drift_mw == pytest.approx(40.0, abs=8)
    assert not baseline.quiet


def test_too_few_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="needs 10 at least"):
        judge(np.arange(5.0), np.ones(5), tolerance_mw=5.0)


class _Meter:
    """Baselines in turn: busy ones first, then quiet ones; a clock that moves by the sleeps."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.now = 0.0
        self.calls = 0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def recent_power(self, seconds: float) -> tuple[np.ndarray, np.ndarray]:
        self.calls += 1
        t, p = _quiet(seconds, seed=self.calls)
        if self.calls <= self.busy:
            p[100 * self.calls : 100 * self.calls + 200] += 687.5 / self.calls
        return t, p


def test_baselines_are_measured_until_the_nodes_are_quiet() -> None:
    meter = _Meter(busy=2)
    measured = measure(
        meter, 1.0, tolerance_mw=5.0, wait_s=30.0, sleep=meter.sleep, clock=lambda: meter.now
    )
    assert measured.attempts == 3 and measured.baseline.quiet
    assert measured.waited_s == pytest.approx(2.0)


def test_nodes_never_quiet_give_the_quietest_baseline_marked_noisy() -> None:
    meter = _Meter(busy=100)
    measured = measure(
        meter, 1.0, tolerance_mw=5.0, wait_s=3.0, sleep=meter.sleep, clock=lambda: meter.now
    )
    assert measured.attempts == 3 and not measured.baseline.quiet
    spreads = [judge(*_busy(n), tolerance_mw=5.0).spread_mw for n in (1, 2, 3)]
    assert measured.baseline.spread_mw == pytest.approx(min(spreads))


def _busy(n: int) -> tuple[np.ndarray, np.ndarray]:
    t, p = _quiet(1.0, seed=n)
    p[100 * n : 100 * n + 200] += 687.5 / n
    return t, p


def test_the_end_baseline_says_how_far_it_moved() -> None:
    t, p = _quiet()
    end = Measured(judge(t, p + 3.0, tolerance_mw=5.0), attempts=1, waited_s=0.0)
    start = judge(t, p, tolerance_mw=5.0).facts()
    assert end_facts(start, end)["change_mw"] == pytest.approx(3.0)
    assert end_facts({}, end)["change_mw"] is None


def test_activity_cannot_widen_its_own_bound() -> None:
    """Bursts spread over every fifth (other traffic on a shared loopback, say) raise the
    samples' sd, but the meter's noise is estimated from successive samples' differences, so
    the bound stays the meter's and the drift they cause is caught."""
    t, p = _quiet()
    for start in range(300, 5000, 700):
        p[start : start + 60 + start // 50] += 500.0 + start / 10
    baseline = judge(t, p, tolerance_mw=5.0)
    assert baseline.sd_mw > 150
    assert baseline.noise_mw == pytest.approx(120.0, rel=0.1)
    assert not baseline.quiet
