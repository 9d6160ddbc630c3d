"""SampleStore: indices kept with values, gaps counted, u32 wrap unwrapped, windows cut."""

from __future__ import annotations

import numpy as np

from controller.meter.protocol import Samples
from controller.meter.samples import SampleStore


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
    store.add(frame(top, 10), 0)
    store.add(frame(top + 10, 10), 1)  # raw index 0
    assert store.next_index == (1 << 32) + 10
    assert store.missing == top  # the run began (for this store) at index 0
    assert store.window(top, top + 20).indices.tolist() == list(range(top, top + 20))


def test_frames_with_another_channel_count_are_set_aside():
    store = SampleStore()
    store.add(frame(0, 10, channels=2), 0)
    store.add(frame(10, 10, channels=1), 0)
    assert (store.received, store.mismatched_frames) == (10, 1)
