from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.h2.flow import WINDOW_UPDATE_POLICIES, ReceiveWindow


@given(
    st.integers(1, 2**20),
    st.sampled_from([0, 1, 65535, 2**20]),
    st.sampled_from(WINDOW_UPDATE_POLICIES),
    st.lists(st.integers(1, 20000), max_size=200),
)
def test_peer_never_holds_more_than_the_window_and_never_stalls(
    target: int, initial: int, policy: str, frames: list[int]
) -> None:
    window = ReceiveWindow(target, initial, policy)  # type: ignore[arg-type]
    peer_credit = initial + window.opening_increment()
    for wanted in frames:
        # A well-behaved peer sends at most its credit.
        size = min(wanted, peer_credit)
        if size == 0:
            # It has no credit: the receiver must already have restored it.
            pytest.fail(f"peer stalled with allowance {window.allowance} of {target}")
        peer_credit -= size
        peer_credit += window.consume(size)
        assert peer_credit == window.allowance
        if initial <= target:
            assert peer_credit <= target


def test_half_policy_updates_at_half_the_window() -> None:
    window = ReceiveWindow(256, 256, "half")
    assert window.consume(127) == 0
    assert window.consume(1) == 128
    assert window.allowance == 256


def test_every_frame_policy_updates_each_frame() -> None:
    window = ReceiveWindow(65535, 65535, "every-frame")
    assert [window.consume(100) for _ in range(3)] == [100, 100, 100]


def test_exhausted_policy_waits_for_zero() -> None:
    window = ReceiveWindow(1000, 1000, "exhausted")
    assert window.consume(999) == 0
    assert window.consume(1) == 1000


def test_connection_window_smaller_than_the_initial_credit_is_reached_by_withholding() -> None:
    window = ReceiveWindow(255, 65535, "half")
    assert window.opening_increment() == 0
    assert window.consume(65535 - 255) == 0
    assert window.consume(126) == 0
    assert window.consume(1) == 127
    assert window.allowance == 255


def test_connection_window_larger_than_the_initial_credit_opens_at_once() -> None:
    window = ReceiveWindow(1 << 20, 65535, "half")
    assert window.opening_increment() == (1 << 20) - 65535
