"""The exchanges' queues (agent.exchange_queues), sans-IO: bytes in, the same bytes out in
frame-sized pieces, and the waits that depend on them."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from agent.exchange_queues import ReceiveQueue, SendQueue, error_code_name


@given(
    st.lists(st.binary(max_size=300), max_size=20),
    st.lists(st.integers(min_value=1, max_value=500), min_size=1, max_size=20),
)
def test_send_queue_gives_back_exactly_what_was_put_in_pieces_no_larger_than_asked(
    chunks: list[bytes], frame_sizes: list[int]
) -> None:
    queue = SendQueue()
    for chunk in chunks:
        queue.put(chunk)
    expected = b"".join(chunks)
    assert queue.buffered_bytes == len(expected)
    taken = b""
    turn = 0
    while queue.buffered_bytes:
        size = frame_sizes[turn % len(frame_sizes)]
        piece = queue.take(size)
        assert 0 < len(piece) <= size
        taken += piece
        assert queue.buffered_bytes == len(expected) - len(taken)
        turn += 1
    assert taken == expected


def test_send_queue_wakes_each_drainer_at_its_own_low_water() -> None:
    async def scenario() -> list[int]:
        queue = SendQueue()
        queue.put(b"x" * 1000)
        woken: list[int] = []

        async def drain(low_water: int) -> None:
            await queue.wait_below(low_water)
            woken.append(low_water)

        tasks = [asyncio.ensure_future(drain(mark)) for mark in (600, 100, 0)]
        await asyncio.sleep(0)
        queue.take(300)  # 700 left: nobody
        await asyncio.sleep(0)
        assert woken == []
        queue.take(200)  # 500 left: the 600 mark
        await asyncio.sleep(0)
        assert woken == [600]
        queue.clear()  # gone: everyone
        await asyncio.gather(*tasks)
        return woken

    assert asyncio.run(scenario()) == [600, 100, 0]


def test_receive_queue_owes_the_credit_of_what_it_drops() -> None:
    async def scenario() -> None:
        queue = ReceiveQueue()
        assert not queue
        queue.put(b"abc", 3)
        queue.put(b"", 10)  # padding only: still flow-controlled
        queue.put(b"defg", 5)
        assert queue.pop() == (b"abc", 3)
        assert queue.clear() == 15
        assert not queue
        waiter = asyncio.ensure_future(queue.wait())
        await asyncio.sleep(0)
        assert not waiter.done()
        queue.wake()
        await waiter

    asyncio.run(scenario())


def test_error_codes_read_by_name() -> None:
    assert error_code_name(2) == "INTERNAL_ERROR"
    assert error_code_name(0) == "NO_ERROR"
    assert error_code_name(0x99) == "error code 153"
