"""SampleStore: indices kept with values, gaps counted, u32 wrap unwrapped, windows cut."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from controller.meter.protocol import Samples
from controller.meter.samples import MAX_JUMP_SAMPLES, SampleStore


def frame(first: int, n: int, channels: int = 2) -> Samples:
    values = (np.arange(first, first + n)[:, None] + np.arange(channels)[None, :]) % 1024
    return Samples(0, first % (1 << 32), values.astype(np.uint16))


def test_window_cuts_inside_frames_and_reports_missing_samples():
    store = SampleStore()
    for first in (0, 10, 30, 40):  # frame 20..29 lost
        store.add(frame(first, 10), t_mono_ns=first)
    assert (store.received, store.missing, store.next_index) == (40, 10, 50)
    window = store.window(5, 45)
    assert window.indices.tolist() == [*range(5, 20), *range(30, 45)]
    assert (window.values[:, 0] == window.indices % 1024).all()
    assert window.missing == 10
    assert store.window(100, 200).indices.size == 0


def test_growth_keeps_every_value():
    store = SampleStore()
    for k in range(2000):
        store.add(frame(10 * k, 10), t_mono_ns=k)
    window = store.all()
    assert (window.indices == np.arange(20_000)).all()
    assert (window.values[:, 1] == (window.indices + 1) % 1024).all()
    last, t_ns = store.arrivals()
    assert last[:3].tolist() == [9, 19, 29]
    assert t_ns[-1] == 1999


def test_u32_index_wrap_keeps_counting():
    store = SampleStore()
    top = (1 << 32) - 10
    # Up to the top of the u32 range in gaps a long-stalled link could leave.
    steps = range(0, top, MAX_JUMP_SAMPLES)
    for first in steps:
        store.add(frame(first, 1), 0)
    store.add(frame(top, 10), 0)
    store.add(frame(top + 10, 10), 1)  # raw index 0
    assert store.next_index == (1 << 32) + 10
    assert store.missing == top - len(steps)  # the run began (for this store) at index 0
    assert store.window(top, top + 20).indices.tolist() == list(range(top, top + 20))
    store.add(frame(top + 20 + MAX_JUMP_SAMPLES + 1, 1), 2)  # a gap larger than any stall
    assert (store.next_index, store.jumped_frames) == ((1 << 32) + 10, 1)


def test_a_jump_in_sample_indices_is_refused_not_taken_for_a_wrap():
    store = SampleStore()
    store.add(frame(0, 10), 1)
    store.add(frame(3_000_000_000, 10), 2)  # far ahead: refused, not 3e9 samples missing
    store.add(frame(10, 10), 3)  # back where it was: not a wrap to 2**32 + 10
    store.add(frame(5, 10), 4)  # behind what arrived (a duplicate): refused too
    assert (store.next_index, store.received, store.missing) == (20, 20, 0)
    assert store.jumped_frames == 2
    window = store.all()
    assert window.indices.tolist() == list(range(20)) and window.missing == 0


def test_frames_with_another_channel_count_are_set_aside():
    store = SampleStore()
    store.add(frame(0, 10, channels=2), 0)
    store.add(frame(10, 10, channels=1), 0)
    assert (store.received, store.mismatched_frames) == (10, 1)


def _feed(frames: list[tuple[int, int]]) -> list[tuple[Samples, int]]:
    """Frames of (gap before, count), placed one after another from index 0, arriving 1 ms
    apart."""
    out = []
    index = 0
    for k, (gap, count) in enumerate(frames):
        index += gap
        out.append((frame(index, count), k * 1_000_000))
        index += count
    return out


_FRAMES = st.lists(st.tuples(st.integers(0, 30), st.integers(1, 40)), min_size=1, max_size=60)


@given(_FRAMES, st.lists(st.integers(0, 2500), max_size=6), st.data())
def test_a_window_starting_at_or_after_a_release_reads_as_if_nothing_was_released(
    frames: list[tuple[int, int]], releases: list[int], data: st.DataObject
) -> None:
    kept, released = SampleStore(), SampleStore()
    feed = _feed(frames)
    # Releases land between frames, as a trial's begin_trial does between reads.
    at = sorted(
        data.draw(
            st.lists(st.integers(0, len(feed)), min_size=len(releases), max_size=len(releases))
        )
    )
    for k, (samples, t_ns) in enumerate(feed):
        for index in [r for r, when in zip(releases, at, strict=True) if when == k]:
            released.release_before(index)
        kept.add(samples, t_ns)
        released.add(samples, t_ns)
    bound = released.released_index
    assert bound <= max(releases, default=0)  # never past what had arrived
    for name in ("received", "missing", "next_index", "jumped_frames", "mismatched_frames"):
        assert getattr(released, name) == getattr(kept, name), name
    first = data.draw(st.integers(bound, kept.next_index + 5))
    end = data.draw(st.integers(first, kept.next_index + 5))
    want, got = kept.window(first, end), released.window(first, end)
    assert got.indices.tolist() == want.indices.tolist()
    assert np.array_equal(got.values, want.values)
    assert (got.first_index, got.end_index, got.missing) == (first, end, want.missing)
    last, t_ns = kept.arrivals()
    held_last, held_t_ns = released.arrivals()
    suffix = last >= bound  # the frames holding a sample at or after the release
    assert held_last.tolist() == last[suffix].tolist()
    assert held_t_ns.tolist() == t_ns[suffix].tolist()


def test_a_window_reaching_below_the_release_starts_at_it() -> None:
    store = SampleStore()
    for samples, t_ns in _feed([(0, 10), (5, 10)]):
        store.add(samples, t_ns)
    store.release_before(12)
    window = store.window(0, 25)
    assert (window.first_index, window.indices.tolist()) == (12, [*range(15, 25)])
    assert window.missing == 3  # 12..14, never sent: not the released ones
    assert store.all().indices.tolist() == list(range(15, 25))
    store.release_before(5)  # a release never takes back another
    assert store.released_index == 12


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 50)), min_size=50, max_size=400))
def test_held_samples_stay_bounded_over_an_unbounded_feed(
    frames: list[tuple[int, int]],
) -> None:
    """Released every 10 frames to `horizon` behind the newest sample: what is held never
    exceeds the horizon, the frames since the last release and the one straddling it."""
    store = SampleStore()
    horizon = 100
    for k, (samples, t_ns) in enumerate(_feed(frames)):
        if k % 10 == 0:
            store.release_before(store.next_index - horizon)
        store.add(samples, t_ns)
        assert store.held_samples <= horizon + 11 * 50
    assert store.received == sum(count for _gap, count in frames)
    assert store.held_bytes <= 2 * (4096 * 2 * 2 + 256 * 3 * 8)  # the initial room, at most doubled
