"""The marker's pulses found in GPI samples read in chunks, and their match to a run's trials."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.meter.jls.pulses import (
    Drop,
    Expected,
    MatchError,
    Pulse,
    ScanState,
    Tolerance,
    match_pulses,
    scan_bits,
    unpack_bits,
)

RATE = 1_000_000


def _reference(bits: np.ndarray) -> list[Pulse]:
    """Pulses by a plain walk: a rise to a fall, neither the part high at the start nor an
    unfinished one."""
    pulses, rise = [], None
    for i in range(1, len(bits)):
        if bits[i] and not bits[i - 1]:
            rise = i
        elif not bits[i] and bits[i - 1] and rise is not None:
            pulses.append(Pulse(rise, i))
            rise = None
    return pulses


def _scan(bits: np.ndarray, cuts: list[int]) -> tuple[ScanState, list[Pulse]]:
    state, found = ScanState(), []
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(bits)), len(bits)]
    for lo, hi in pairwise(bounds):
        state, pulses = scan_bits(state, bits[lo:hi], lo)
        found.extend(pulses)
    return state, found


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 1), min_size=1, max_size=300),
    st.lists(st.integers(0, 300), max_size=12),
)
def test_pulses_do_not_depend_on_how_the_samples_are_chunked(levels, cuts) -> None:
    bits = np.array(levels, dtype=np.uint8)
    state, found = _scan(bits, cuts)
    assert found == _reference(bits)
    assert state.next_index == len(bits)
    assert state.high_at_start == bool(bits[0])
    # An unfinished pulse is open, not counted, and only when the line ends high after a rise.
    if state.rise_index is not None:
        assert bits[-1] == 1 and bits[state.rise_index] == 1 and bits[state.rise_index - 1] == 0


def _reference_across_drops(
    bits: np.ndarray, dropped: np.ndarray
) -> tuple[list[Pulse], list[Drop]]:
    """Pulses by a plain walk over the known samples (a dropped one reading 0 is unknown): a rise
    just after the last known low sample, a fall at the first known low one; and the drops."""
    pulses, drops, rise, last, level, drop_start = [], [], None, None, None, None
    for i, (bit, lost) in enumerate(zip(bits, dropped, strict=True)):
        if lost and not bit:
            drop_start = i if drop_start is None else drop_start
            continue
        if drop_start is not None:
            drops.append(Drop(drop_start, i))
            drop_start = None
        if level == 0 and bit:
            rise = last + 1
        elif level == 1 and not bit and rise is not None:
            pulses.append(Pulse(rise, i))
            rise = None
        last, level = i, int(bit)
    return pulses, drops


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.booleans()), min_size=1, max_size=300),
    st.lists(st.integers(0, 300), max_size=12),
)
def test_pulses_across_drops_do_not_depend_on_how_the_samples_are_chunked(samples, cuts) -> None:
    bits = np.array([b for b, _ in samples], dtype=np.uint8)
    dropped = np.array([d for _, d in samples], dtype=bool)
    state, found = ScanState(), []
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(bits)), len(bits)]
    for lo, hi in pairwise(bounds):
        state, pulses = scan_bits(state, bits[lo:hi], lo, dropped[lo:hi])
        found.extend(pulses)
    pulses, drops = _reference_across_drops(bits, dropped)
    assert found == pulses
    assert list(state.drops) == drops
    assert (state.drop_start is not None) == bool(dropped[-1] and not bits[-1])


def test_a_pulse_spanning_a_drop_is_one_pulse_covering_it() -> None:
    bits = np.array([0, 1, 1, 0, 0, 0, 1, 1, 0, 0], dtype=np.uint8)
    dropped = np.array([0, 0, 0, 1, 1, 1, 0, 0, 0, 0], dtype=bool)
    state, found = _scan_dropped(bits, dropped, [4])
    assert found == [Pulse(1, 8)]
    assert state.drops == (Drop(3, 6),)


def test_an_edge_inside_a_drop_puts_the_window_over_the_whole_drop() -> None:
    # A rise at the drop's first sample, a fall after its last: its samples are the trial's.
    dropped = np.array([0, 1, 1, 0, 0, 1, 1, 0, 0], dtype=bool)
    bits = np.array([0, 0, 0, 1, 1, 0, 0, 0, 0], dtype=np.uint8)
    assert _scan_dropped(bits, dropped, [2, 6])[1] == [Pulse(1, 7)]
    # A 1 where the current is NaN is the device's (a fill reads 0): it is kept.
    bits = np.array([0, 1, 0, 1, 1, 0, 0, 0, 0], dtype=np.uint8)
    assert _scan_dropped(bits, dropped, [])[1] == [Pulse(1, 7)]


def _scan_dropped(bits, dropped, cuts) -> tuple[ScanState, list[Pulse]]:
    state, found = ScanState(), []
    for lo, hi in pairwise([0, *cuts, len(bits)]):
        state, pulses = scan_bits(state, bits[lo:hi], lo, dropped[lo:hi])
        found.extend(pulses)
    return state, found


def test_a_line_high_from_the_first_sample_is_no_pulse() -> None:
    bits = np.array([1, 1, 0, 0, 1, 1, 1, 0, 1], dtype=np.uint8)
    state, found = _scan(bits, [1, 5])
    assert found == [Pulse(4, 7)]
    assert state.high_at_start and state.rise_index == 8


def test_a_chunk_that_skips_samples_is_refused() -> None:
    state, _ = scan_bits(ScanState(), np.zeros(8, np.uint8), 0)
    with pytest.raises(ValueError, match="starts at sample 16, expected 8"):
        scan_bits(state, np.zeros(8, np.uint8), 16)


def test_an_empty_chunk_changes_nothing() -> None:
    state = ScanState(next_index=5, level=1, rise_index=3)
    assert scan_bits(state, np.zeros(0, np.uint8), 5) == (state, ())


def test_packed_bits_unpack_in_little_bit_order() -> None:
    packed = np.array([0b0000_0110, 0b1000_0000], dtype=np.uint8)
    assert unpack_bits(packed, 16).tolist() == [0, 1, 1, 0, 0, 0, 0, 0] + [0] * 7 + [1]
    assert unpack_bits(packed, 3).tolist() == [0, 1, 1]
    with pytest.raises(ValueError, match="hold 16 samples, not 17"):
        unpack_bits(packed, 17)


def test_pulse_times_are_exact_to_a_sample() -> None:
    pulse = Pulse(1_500_000, 1_750_001)
    assert pulse.start_s(RATE) == 1.5
    assert pulse.duration_s(RATE) == pytest.approx(0.250001, abs=1e-12)


# --- matching ---------------------------------------------------------------------------------

T0 = 1_796_000_000_000_000_000
DURATIONS_S = [0.08, 0.31, 0.12, 0.45, 0.2]
GAP_S = 0.5


def _trials(durations=DURATIONS_S) -> list[Expected]:
    trials, start = [], T0
    for n, duration in enumerate(durations, start=1):
        trials.append(Expected(f"t{n}", 1, start, start + round(duration * 1e9)))
        start += round((duration + GAP_S) * 1e9)
    return trials


def _pulses(trials: list[Expected], first_s: float = 3.0) -> list[Pulse]:
    """Each trial's pulse on a recording whose index 0 is `first_s` before the first trial."""
    start = T0 - round(first_s * 1e9)
    return [
        Pulse(round((t.start_ns - start) * RATE / 1e9), round((t.end_ns - start) * RATE / 1e9))
        for t in trials
    ]


def test_pulses_that_match_pair_with_their_trials_in_order() -> None:
    trials = _trials()
    pulses = _pulses(trials)
    matched = match_pulses(pulses, trials, RATE)
    assert [(m.expected.trial_id, m.pulse, m.number) for m in matched] == [
        (t.trial_id, p, n) for n, (t, p) in enumerate(zip(trials, pulses, strict=True), 1)
    ]


def test_a_pulse_missing_in_the_middle_is_named() -> None:
    trials = _trials()
    pulses = _pulses(trials)
    del pulses[2]
    with pytest.raises(MatchError) as caught:
        match_pulses(pulses, trials, RATE)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("pulse 3 (at ")
    assert "does not match trial t3: lasts 0.450000 s, the trial 0.120000 s" in message
    assert "(4 pulses in the recording, 5 trials in the run)" in message


def test_a_mismatch_names_the_samples_since_the_previous_pulse() -> None:
    """Where a drop may have swallowed the missing pulse: from pulse 2's start to pulse 3's end."""
    trials = _trials()
    pulses = _pulses(trials)
    del pulses[2]
    with pytest.raises(MatchError) as caught:
        match_pulses(pulses, trials, RATE)
    assert (caught.value.first_index, caught.value.end_index) == (
        pulses[1].start_index,
        pulses[2].end_index,
    )
    state = ScanState(drops=(Drop(10, 20), Drop(pulses[1].end_index + 8, pulses[2].start_index)))
    assert state.drops_within(caught.value.first_index, caught.value.end_index) == state.drops[1:]


def test_a_missing_pulse_between_trials_of_one_length_is_found_by_the_spacing() -> None:
    trials = _trials([0.2] * 5)
    pulses = _pulses(trials)
    del pulses[1]
    with pytest.raises(MatchError, match=r"^pulse 2 .* t2: starts 1\.400000 s after pulse 1, "
                       r"the trial 0\.700000 s after t1 "):  # fmt: skip
        match_pulses(pulses, trials, RATE)


def test_an_extra_pulse_is_named() -> None:
    trials = _trials()
    pulses = _pulses(trials)
    extra = Pulse(pulses[1].end_index + 100_000, pulses[1].end_index + 150_000)
    pulses.insert(2, extra)
    with pytest.raises(MatchError, match=r"^pulse 3 \(at 3\.990000 s\) does not match trial t3: "):
        match_pulses(pulses, trials, RATE)


def test_a_pulse_left_over_at_the_end_has_no_trial() -> None:
    trials = _trials()
    pulses = _pulses(trials)
    pulses.append(Pulse(pulses[-1].end_index + 10, pulses[-1].end_index + 20))
    with pytest.raises(MatchError, match=r"^pulse 6 \(at \d+\.\d{6} s\) has no trial: 6 pulses"):
        match_pulses(pulses, trials, RATE)


def test_a_trial_left_over_at_the_end_has_no_pulse() -> None:
    trials = _trials()
    with pytest.raises(MatchError, match=r"^trial t5 has no pulse: 4 pulses .*, 5 trials"):
        match_pulses(_pulses(trials)[:4], trials, RATE)


def test_a_retried_attempt_is_named_with_its_attempt() -> None:
    trials = _trials()
    retried = [*trials[:2], Expected("t2", 2, trials[2].start_ns, trials[2].end_ns)]
    with pytest.raises(MatchError, match=r"trial t2 \(attempt 2\) has no pulse"):
        match_pulses(_pulses(trials)[:2], retried, RATE)


def test_the_tolerance_allows_what_it_says_and_no_more() -> None:
    tolerance = Tolerance(duration_abs_s=0.005, duration_rel=0.02, spacing_abs_s=0.05,
                          spacing_rel=0.01)  # fmt: skip
    assert tolerance.duration_ok(1.0, 1.0249)
    assert not tolerance.duration_ok(1.0, 1.0251)
    assert tolerance.spacing_ok(10.0, 10.1499)
    assert not tolerance.spacing_ok(10.0, 9.8499)
    trials = _trials()
    pulses = _pulses(trials)
    # The Joulescope's clock 100 ppm fast: every pulse 100 ppm longer and further apart.
    scaled = [Pulse(round(p.start_index * 1.0001), round(p.end_index * 1.0001)) for p in pulses]
    assert len(match_pulses(scaled, trials, RATE)) == 5
    late = [*pulses[:3], Pulse(pulses[3].start_index, pulses[3].end_index + 20_000), pulses[4]]
    with pytest.raises(MatchError, match=r"pulse 4 .* lasts 0\.470000 s, the trial 0\.450000 s"):
        match_pulses(late, trials, RATE)
    assert len(match_pulses(late, trials, RATE, Tolerance(duration_abs_s=0.02))) == 5
