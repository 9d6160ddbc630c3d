"""SampleStore: indices kept with values, gaps counted, u32 wrap unwrapped, windows cut."""

from __future__ import annotations

import numpy as np

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
