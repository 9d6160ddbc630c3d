"""nghttp2's 2^N - 1 windows: the nearest mapping, and map vs reject."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.engines.nghttp2.windows import MAX_BITS, is_representable, map_window, nearest_bits
from agent.errors import UsageError

STUDY = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535]


def test_the_study_windows_map_as_the_study_ran_them() -> None:
    on_wire = [map_window("w", w, "map").on_wire for w in STUDY]
    assert on_wire == [255, 511, 1023, 2047, 4095, 8191, 16383, 32767, 65535]
    assert [map_window("w", w, "map").exact for w in STUDY] == [False] * 8 + [True]


@given(st.integers(0, 2**31 - 1))
def test_nearest_is_nearest_in_bytes_with_ties_to_the_larger(window: int) -> None:
    bits = nearest_bits(window)
    assert 0 <= bits <= MAX_BITS
    distance = abs((2**bits - 1) - window)
    for other in range(MAX_BITS + 1):
        other_distance = abs((2**other - 1) - window)
        assert distance < other_distance or (distance == other_distance and bits >= other)


@given(st.integers(0, MAX_BITS))
def test_every_2n_minus_1_is_exact(bits: int) -> None:
    mapping = map_window("w", 2**bits - 1, "reject")
    assert (mapping.bits, mapping.exact) == (bits, True)
    assert is_representable(2**bits - 1)


@given(st.integers(0, 2**31 - 1).filter(lambda w: not is_representable(w)))
def test_reject_refuses_what_nghttp2_cannot_express(window: int) -> None:
    with pytest.raises(UsageError, match=rf"--initial-window-size {window} is not 2\^N - 1"):
        map_window("--initial-window-size", window, "reject")


def test_beyond_2_30_is_clamped_and_not_exact() -> None:
    mapping = map_window("w", 2**31 - 1, "map")
    assert (mapping.bits, mapping.on_wire, mapping.exact) == (30, 2**30 - 1, False)


def test_ties_and_small_values() -> None:
    assert [nearest_bits(w) for w in (0, 1, 2, 3, 5, 6, 10, 11)] == [0, 1, 2, 2, 3, 3, 3, 4]
