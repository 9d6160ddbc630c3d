"""The breakdown search's planner against synthetic monotone curves, with and without noise."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.sweep.breakdown import (
    Ask,
    Breakdown,
    Phase,
    SearchSpec,
    SearchState,
    Verdict,
    judge,
    start,
)

Curve = Callable[[float], float]


def logistic(knee: float, steepness: float) -> Curve:
    """A received/demanded ratio: 1 at small x, falling through 0.5 at `knee`."""
    return lambda x: 1.0 / (1.0 + (x / knee) ** steepness)


def crossing(knee: float, steepness: float, level: float) -> float:
    """Where `logistic(knee, steepness)` equals `level` (0 < level < 1)."""
    return float(knee * ((1 - level) / level) ** (1 / steepness))


def run_search(
    spec: SearchSpec, curve: Curve, noise: float = 0.0, seed: int = 0, sign: float = 1.0
) -> tuple[Breakdown, list[tuple[int, float, int]]]:
    """Drive the planner to the end, as the sweep engine does, on scores `sign` x (the curve
    plus uniform noise); the asks it made."""
    rng = random.Random(seed)
    state = start(spec)
    asks = []
    while (ask := state.ask()) is not None:
        asks.append((ask.probe, ask.value, ask.trials))
        assert ask.trials >= 1
        for _ in range(ask.trials):
            state = state.feed(sign * (curve(ask.value) + rng.uniform(-noise, noise)))
        assert len(asks) < 1000, "the search does not end"
    return state.result(), asks


specs = st.builds(
    SearchSpec,
    low=st.integers(1, 100).map(float),
    high=st.integers(200, 10_000_000).map(float),
    threshold=st.just(0.75),
    repetitions=st.integers(1, 5),
    max_repetitions=st.integers(5, 15),
    resolution=st.floats(1.05, 4.0),
    confidence=st.sampled_from((0.8, 0.9, 0.95)),
    integer=st.booleans(),
)
knees = st.floats(0.5, 2e7)
steepness = st.floats(0.3, 6.0)


@settings(max_examples=150, deadline=None)
@given(spec=specs, knee=knees, k=steepness)
def test_without_noise_the_bracket_holds_the_true_breakdown(
    spec: SearchSpec, knee: float, k: float
) -> None:
    curve = logistic(knee, k)
    result, asks = run_search(spec, curve)
    true = crossing(knee, k, spec.threshold)
    if curve(spec.low) < spec.threshold:
        assert result.status == "below_low" and result.passing is None
        assert result.failing is not None and result.failing.value == spec.low
    elif curve(spec.high) >= spec.threshold:
        assert result.status == "above_high" and result.failing is None
        assert result.passing is not None and result.passing.value == spec.high
    else:
        assert result.status == "found"
        assert result.passing is not None and result.failing is not None
        assert result.passing.value <= true * (1 + 1e-9)
        assert true * (1 - 1e-9) <= result.failing.value
        ratio = result.failing.value / result.passing.value
        adjacent = spec.integer and result.failing.value - result.passing.value <= 1
        assert ratio <= spec.resolution or adjacent
        assert result.passing.value <= result.estimate <= result.failing.value
    # Noise-free scores have no spread: each probe is decided by its first two trials.
    assert all(not probe.forced for probe in result.probes)
    assert all(len(probe.scores) == max(2, spec.repetitions) for probe in result.probes)
    assert len(result.probes) <= spec.max_probes() + 1
    assert [probe.index for probe in result.probes] == list(range(1, len(result.probes) + 1))
    if spec.integer:
        assert all(probe.value == int(probe.value) for probe in result.probes)
    assert {a[0] for a in asks} == {probe.index for probe in result.probes}


@settings(max_examples=150, deadline=None)
@given(spec=specs, knee=knees, k=steepness, noise=st.floats(0.0, 0.3), seed=st.integers(0, 99))
def test_with_bounded_noise_every_clear_probe_is_decided_right(
    spec: SearchSpec, knee: float, k: float, noise: float, seed: int
) -> None:
    curve = logistic(knee, k)
    result, _asks = run_search(spec, curve, noise, seed)
    for probe in result.probes:
        truth = curve(probe.value)
        if truth - noise >= spec.threshold:
            assert probe.verdict is Verdict.PASS, probe
        if truth + noise < spec.threshold:
            assert probe.verdict is Verdict.FAIL, probe
        n = len(probe.scores)
        assert n <= spec.max_repetitions
        assert n == spec.max_repetitions or n % spec.repetitions == 0
        assert probe.forced == (n == spec.max_repetitions and not _significant(probe, spec))
    # Monotone: every passing probe lies below every failing one (each was probed inside the
    # bracket the earlier ones left).
    passed = [p.value for p in result.probes if p.verdict is Verdict.PASS]
    failed = [p.value for p in result.probes if p.verdict is Verdict.FAIL]
    assert not passed or not failed or max(passed) < min(failed)
    assert result.trials == sum(len(p.scores) for p in result.probes)


def _significant(probe: object, spec: SearchSpec) -> bool:
    summary = probe.summary  # type: ignore[attr-defined]
    if summary.n < 2:
        return False
    return bool(summary.ci_low >= spec.threshold or summary.ci_high < spec.threshold)


@settings(max_examples=60, deadline=None)
@given(spec=specs, knee=knees, k=steepness, noise=st.floats(0.0, 0.2), seed=st.integers(0, 99))
def test_a_metric_that_grows_is_the_mirror_image(
    spec: SearchSpec, knee: float, k: float, noise: float, seed: int
) -> None:
    """Searching `at_most` over -(f + noise) is the same search as `at_least` over f + noise."""
    curve = logistic(knee, k)
    mirrored = SearchSpec(
        spec.low,
        spec.high,
        -spec.threshold,
        "at_most",
        spec.repetitions,
        spec.max_repetitions,
        spec.resolution,
        spec.confidence,
        spec.integer,
    )
    ahead, _ = run_search(spec, curve, noise, seed)
    mirror, _ = run_search(mirrored, curve, noise, seed, sign=-1.0)
    assert [(p.value, p.verdict, len(p.scores)) for p in ahead.probes] == [
        (p.value, p.verdict, len(p.scores)) for p in mirror.probes
    ]
    assert ahead.status == mirror.status


def test_a_probe_holding_the_threshold_asks_for_more_rounds_up_to_the_bound() -> None:
    spec = SearchSpec(1, 1000, 0.75, repetitions=3, max_repetitions=7)
    state = start(spec)
    assert state.ask() == Ask(1, 1.0, 3)
    for score in (0.7, 0.8, 0.75):
        state = state.feed(score)
    assert state.phase is Phase.CHECK_LOW and state.ask() == Ask(1, 1.0, 3)
    for score in (0.7, 0.8, 0.76):
        state = state.feed(score)
    assert state.ask() == Ask(1, 1.0, 1)  # the bound cuts the third round short
    state = state.feed(0.7)
    (probe,) = state.probes
    assert probe.forced and probe.verdict is Verdict.FAIL and len(probe.scores) == 7
    assert state.done and state.result().status == "below_low"


def test_a_clear_probe_is_decided_at_the_end_of_its_first_round() -> None:
    spec = SearchSpec(10, 1000, 0.75, repetitions=3)
    state = start(spec)
    for score in (0.99, 0.98):
        state = state.feed(score)
        assert not state.probes  # judged per round, not per trial
    state = state.feed(1.0)
    assert [p.verdict for p in state.probes] == [Verdict.PASS]
    assert state.phase is Phase.CHECK_HIGH and state.ask() == Ask(2, 1000.0, 3)
    for score in (0.1, 0.12, 0.11):
        state = state.feed(score)
    assert state.phase is Phase.BISECT and state.ask() == Ask(3, 100.0, 3)


def test_one_repetition_still_needs_two_values_for_an_interval() -> None:
    state = start(SearchSpec(1, 8, 0.75, repetitions=1, max_repetitions=4))
    state = state.feed(0.9)
    assert not state.probes and state.ask() == Ask(1, 1.0, 1)
    state = state.feed(0.9)
    assert state.probes[0].verdict is Verdict.PASS and not state.probes[0].forced


def test_feeding_a_finished_search_or_a_non_number_is_refused() -> None:
    state = start(SearchSpec(1, 8, 0.75, repetitions=2))
    with pytest.raises(ValueError, match="finite"):
        state.feed(math.nan)
    for _ in range(2):
        state = state.feed(0.1)
    assert state.done and state.ask() is None
    with pytest.raises(ValueError, match="done"):
        state.feed(0.5)
    with pytest.raises(ValueError, match="not done"):
        start(SearchSpec(1, 8, 0.75)).result()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"low": 0.0}, "0 < low"),
        ({"low": 10.0, "high": 5.0}, "0 < low"),
        ({"low": 1.5}, "whole"),
        ({"repetitions": 0}, "repetitions"),
        ({"repetitions": 5, "max_repetitions": 4}, "repetitions"),
        ({"resolution": 1.0}, "resolution"),
        ({"confidence": 1.0}, "confidence"),
    ],
)
def test_a_spec_that_cannot_search_is_refused(kwargs: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"low": 1.0, "high": 100.0, "threshold": 0.75, **kwargs}
    with pytest.raises(ValueError, match=message):
        SearchSpec(**values)  # type: ignore[arg-type]


def test_judge_reads_the_interval_on_the_side_the_metric_holds() -> None:
    at_most = SearchSpec(1, 8, 0.002, holds="at_most", repetitions=3)
    verdict, summary, forced = judge((0.001, 0.0011, 0.0012), at_most)
    assert verdict is Verdict.PASS and not forced and summary.ci_high <= 0.002
    assert judge((0.004, 0.0041, 0.0039), at_most)[0] is Verdict.FAIL
    assert judge((0.001, 0.003, 0.002), at_most)[0] is Verdict.MORE


def test_state_is_a_value() -> None:
    """Two searches fed the same scores are equal: a resumed run replays to the same state."""
    spec = SearchSpec(1, 1000, 0.75)
    one: SearchState = start(spec)
    two: SearchState = start(spec)
    for score in (0.9, 0.91, 0.92, 0.2, 0.25):
        one, two = one.feed(score), two.feed(score)
    assert one == two


def test_a_trial_that_cannot_finish_fails_its_probe() -> None:
    state = start(SearchSpec(1, 1000, 0.75, repetitions=2))
    for score in (0.9, 0.95):
        state = state.feed(score)
    state = state.feed(0.3).fail_probe()  # the high end: one score, then a trial timed out
    low, high = state.probes
    assert (high.verdict, high.unfinished, high.scores, high.forced) == (
        Verdict.FAIL,
        True,
        (0.3,),
        False,
    )
    assert not low.unfinished
    assert state.phase is Phase.BISECT and state.ask() == Ask(3, 32.0, 2)
    state = state.fail_probe()  # no score at all
    assert state.probes[-1].summary.n == 0 and state.failing == state.probes[-1]
