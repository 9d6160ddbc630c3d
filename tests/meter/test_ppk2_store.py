"""Ppk2Store.release_before: bins, edges, gaps, resyncs and reads below an index are forgotten;
a window starting at or after it, the edges after a trial's ordinal and every counter read as
if nothing was released, and what is held stays bounded over an unbounded stream."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.meter.ppk2.decoder import Ppk2Block
from controller.meter.ppk2.store import Ppk2Store

_EMPTY = np.zeros(0, dtype=np.int64)


def _blocks(seed: int, count: int, samples: int, max_gap: int = 400) -> list[Ppk2Block]:
    """`count` blocks of up to `samples` samples, with counter gaps (of up to `max_gap`
    indices), resyncs, clipped samples and marker edges where a seeded generator puts them."""
    rng = np.random.default_rng(seed)
    blocks = []
    index = 0
    for _ in range(count):
        n = int(rng.integers(1, samples + 1))
        step = np.where(rng.random(n) < 0.05, rng.integers(2, max_gap + 1, n), 1)
        step[0] = 1 if index == 0 else step[0]
        at = index - 1 + np.cumsum(step)
        index = int(at[-1]) + 1
        gap_at = np.flatnonzero(step > 1)
        blocks.append(
            Ppk2Block(
                current_ua=rng.random(n) * 1000,
                logic=(rng.random(n) < 0.5).astype(np.uint8) * (rng.random() < 0.3),
                counter=np.zeros(n, dtype=np.uint8),
                meas_range=np.zeros(n, dtype=np.uint8),
                saturated=rng.random(n) < 0.02,
                index=at.astype(np.int64),
                gap_at=gap_at.astype(np.int64),
                gap_lost=(step[gap_at] - 1).astype(np.int64),
                resync_at=np.flatnonzero(rng.random(n) < 0.01).astype(np.int64),
                resync_skipped_bytes=_EMPTY,
                skipped_bytes=0,
            )
        )
    return blocks


def _same(a: object, b: object) -> bool:
    return all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
        for x, y in zip(astuple(a), astuple(b), strict=True)  # type: ignore[arg-type]
    )


@given(
    st.integers(0, 2**32), st.integers(1, 40), st.sampled_from([1000, 10_000, 100_000]), st.data()
)
def test_what_is_read_at_or_after_a_release_is_as_if_nothing_was_released(
    seed: int, count: int, rate_hz: int, data: st.DataObject
) -> None:
    kept, released = Ppk2Store(rate_hz), Ppk2Store(rate_hz)
    ordinal = 0  # the edges a trial beginning at the last release has already seen
    for k, block in enumerate(_blocks(seed, count, 300)):
        if data.draw(st.booleans()):
            released.release_before(data.draw(st.integers(0, released.next_index + 50)))
            ordinal = released.edge_count
        kept.add(block, k)
        released.add(block, k)
    bound = released.released_index
    assert (released.received, released.lost, released.next_index, released.edge_count) == (
        kept.received,
        kept.lost,
        kept.next_index,
        kept.edge_count,
    )
    assert released.edges(ordinal) == kept.edges(ordinal)
    assert all(edge.stream_index >= bound for edge in released.edges())
    first = data.draw(st.integers(bound, kept.next_index + 500))
    end = data.draw(st.integers(first, kept.next_index + 500))
    assert _same(released.window(first, end), kept.window(first, end))
    last, t_ns = kept.arrivals()
    suffix = last >= bound
    held_last, held_t_ns = released.arrivals()
    assert held_last.tolist() == last[suffix].tolist()
    assert held_t_ns.tolist() == t_ns[suffix].tolist()


def test_a_window_reaching_below_the_release_starts_at_it() -> None:
    store = Ppk2Store(10_000)  # bins of 10 stream indices
    for k, block in enumerate(_blocks(7, 20, 100)):
        store.add(block, k)
    before = store.window(0, 1200)
    store.release_before(1000)
    after = store.window(0, 1200)
    assert _same(after, store.window(1000, 1200))
    assert after.t_s.tolist() == before.t_s[before.t_s >= 0.01].tolist()  # bins 100 on
    store.release_before(5)  # a release never takes back another
    assert store.released_index == 1000


@settings(max_examples=20)  # each example is a long stream
@given(st.integers(0, 2**32))
def test_held_bins_and_tables_stay_bounded_over_an_unbounded_stream(seed: int) -> None:
    """Released every 10 blocks to a horizon behind the newest index: bins held never exceed
    the horizon's, the blocks' since the last release and the gaps they skip."""
    store = Ppk2Store(10_000)
    horizon = 2000
    blocks = _blocks(seed, 400, 300, max_gap=3)
    for k, block in enumerate(blocks):
        if k % 10 == 0:
            store.release_before(store.next_index - horizon)
        store.add(block, k)
        # 10 blocks of at most 300 samples, each at most 3 indices on, in bins of 10
        assert store.held_bins <= (horizon + 10 * 300 * 3) // 10 + 2
        if k % 10 == 9:
            # reads: the 10 since the release, and those ending within the horizon behind it
            assert store.arrivals()[0].size <= 11 + horizon
            assert len(store.edges()) <= 11 * 300 + horizon
    assert store.received == sum(len(block) for block in blocks)
    assert store.next_index // 10 > 4 * store.held_bins  # most of the run was released
