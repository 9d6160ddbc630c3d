"""The client fast path's WINDOW_UPDATE frames: the connection's, the stream's, or both in one
packing, byte for byte what hyperframe serializes, in the order h2 would send them."""

from __future__ import annotations

from hyperframe.frame import WindowUpdateFrame
from hypothesis import given
from hypothesis import strategies as st

from agent.h2.fastpath import WINDOW_UPDATE_BYTES, Outgoing, SplitTally, window_updates

INCREMENTS = st.integers(1, 2**31 - 1)


def _frame(stream_id: int, increment: int) -> bytes:
    return bytes(WindowUpdateFrame(stream_id, window_increment=increment).serialize())


@given(st.integers(1, 2**31 - 1), INCREMENTS, INCREMENTS)
def test_both_updates_are_the_connections_then_the_streams(
    stream_id: int, connection_increment: int, stream_increment: int
) -> None:
    frames = window_updates(stream_id, connection_increment, stream_increment)
    assert frames == _frame(0, connection_increment) + _frame(stream_id, stream_increment)


@given(st.integers(1, 2**31 - 1), INCREMENTS)
def test_one_update_is_one_frame(stream_id: int, increment: int) -> None:
    assert window_updates(stream_id, increment, 0) == _frame(0, increment)
    assert window_updates(stream_id, 0, increment) == _frame(stream_id, increment)


def test_a_pair_counts_as_two_frames() -> None:
    class Transport:
        def __init__(self) -> None:
            self.written: list[bytes] = []

        def is_closing(self) -> bool:
            return False

        def write(self, data: bytes) -> None:
            self.written.append(data)

    out = Outgoing(WindowUpdateFrame.type)
    tally = SplitTally()
    out.add_own(window_updates(1, 255, 255), 2 * WINDOW_UPDATE_BYTES, 2)
    out.add_own(window_updates(3, 0, 255), WINDOW_UPDATE_BYTES)
    transport = Transport()
    out.write(transport, tally)
    counts = tally.counts().to_dict()
    assert counts["frames"] == {"WINDOW_UPDATE": 3}
    assert counts["bytes"] == 3 * WINDOW_UPDATE_BYTES == len(transport.written[0])
