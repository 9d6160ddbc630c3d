"""The WINDOW_UPDATE policy at its edges: the smallest and largest windows, one-byte frames, and
what a fetch records of its flow-control choices."""

from __future__ import annotations

import pytest

from agent.errors import SettingsError
from agent.h2.flow import MAX_WINDOW, FlowControlOptions, ReceiveWindow
from agent.h2.settings import check_value


@pytest.mark.parametrize("target", [0, 1, MAX_WINDOW])
def test_windows_from_zero_to_the_protocols_largest_are_accepted(target: int):
    window = ReceiveWindow(target, 65535, "half")
    assert window.target == target
    assert window.opening_increment() == max(0, target - 65535)


@pytest.mark.parametrize("target", [-1, MAX_WINDOW + 1])
def test_a_window_outside_the_protocols_range_is_refused_by_name(target: int):
    """At the edge where it enters (the settings parse), once: the window gets no second check."""
    with pytest.raises(SettingsError) as caught:
        check_value("initial_window_size", target)
    assert str(caught.value) == (
        f"setting initial_window_size={target} is outside RFC 9113's range 0..2147483647"
    )


def test_one_byte_frames_get_one_byte_updates_where_the_policy_says_so():
    every = ReceiveWindow(65535, 65535, "every-frame")
    assert [every.consume(1) for _ in range(3)] == [1, 1, 1]
    tiny_half = ReceiveWindow(3, 3, "half")  # half of 3 is one byte
    assert tiny_half.consume(1) == 1
    two_half = ReceiveWindow(2, 2, "half")
    assert two_half.consume(1) == 1


def test_options_are_recorded_by_name():
    options = FlowControlOptions(connection_window=1024)
    assert options.record(256) == {
        "initial_window_size": 256,
        "connection_window": 1024,
        "window_update_policy": "half",
    }
