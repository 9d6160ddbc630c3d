"""What both ends' exchanges (agent.server.exchange, agent.client.exchange) share: the two
queues of a stream driven piece by piece, bytes received and not yet taken by the workload,
with their flow-controlled lengths (their credit goes back when taken), and bytes queued for
DATA frames, with the tasks waiting for the queue to shrink; the workload's calls over them
(`QueuedExchange`); and how an HTTP/2 error code reads."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections import deque
from typing import Protocol

from h2.errors import ErrorCodes

from agent.errors import AgentError, ProtocolCode


class ReceiveQueue:
    __slots__ = ("_chunks", "_readable")

    def __init__(self) -> None:
        self._chunks: deque[tuple[bytes, int]] = deque()  # payload, flow-controlled length
        self._readable = asyncio.Event()

    def __bool__(self) -> bool:
        return bool(self._chunks)

    def put(self, data: bytes, flow_controlled_bytes: int) -> None:
        self._chunks.append((data, flow_controlled_bytes))
        self._readable.set()

    def pop(self) -> tuple[bytes, int]:
        return self._chunks.popleft()

    def wake(self) -> None:
        """Something other than a chunk happened (the end, a reset): readers look again."""
        self._readable.set()

    async def wait(self) -> None:
        self._readable.clear()
        await self._readable.wait()

    def clear(self) -> int:
        """Drop every chunk; their flow-controlled bytes, whose credit is still owed."""
        unread = sum(size for _data, size in self._chunks)
        self._chunks.clear()
        return unread


class SendQueue:
    __slots__ = ("_chunks", "_drainers", "buffered_bytes")

    def __init__(self) -> None:
        self._chunks: deque[memoryview] = deque()
        self.buffered_bytes = 0
        self._drainers: list[tuple[int, asyncio.Future[None]]] = []

    def put(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        if view:  # an empty chunk would become an empty DATA frame
            self._chunks.append(view)
            self.buffered_bytes += len(view)

    def take(self, max_bytes: int) -> memoryview:
        """Up to `max_bytes` from the front, for one DATA frame."""
        head = self._chunks[0]
        if len(head) <= max_bytes:
            self._chunks.popleft()
            chunk = head
        else:
            chunk = head[:max_bytes]
            self._chunks[0] = head[max_bytes:]
        self.buffered_bytes -= len(chunk)
        if self._drainers:
            self._wake(self.buffered_bytes)
        return chunk

    async def wait_below(self, low_water_bytes: int) -> None:
        """Until `buffered_bytes <= low_water_bytes`, or `clear()`."""
        if self.buffered_bytes > low_water_bytes:
            waiter = asyncio.get_running_loop().create_future()
            self._drainers.append((low_water_bytes, waiter))
            await waiter

    def clear(self) -> None:
        self._chunks.clear()
        self.buffered_bytes = 0
        self._wake(0)

    def _wake(self, buffered: int) -> None:
        waiting = []
        for low_water, waiter in self._drainers:
            if buffered <= low_water:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                waiting.append((low_water, waiter))
        self._drainers = waiting


class QueuedExchange(ABC):
    """Either end's exchange as far as its two queues go: the calls the workload makes on them
    and the connection's `take`. Each end says how a taken chunk's credit goes back and how
    queued bytes reach its connection."""

    def __init__(self, end_queued: bool = False) -> None:
        self._end_queued = end_queued
        self._inbox = ReceiveQueue()
        self._outbox = SendQueue()
        self._error: AgentError | None = None

    @abstractmethod
    def _credit(self, flow_controlled_bytes: int) -> None:
        """The workload took a chunk: give its credit back to the peer."""

    @abstractmethod
    def _queued(self) -> None:
        """Bytes or the stream's end were queued: the connection sends them when it can."""

    @property
    def end_queued(self) -> bool:
        """END_STREAM (or trailers) asked for: nothing more to send."""
        return self._end_queued

    def _queue_end(self) -> None:
        """The stream's end is asked for (an end may keep its own state: override)."""
        self._end_queued = True

    def _pop_received(self) -> bytes | None:
        """The next non-empty chunk received, crediting every chunk taken (empty ones, padding
        only, included); None once the queue is empty."""
        while self._inbox:
            data, size = self._inbox.pop()
            if size:
                self._credit(size)
            if data:
                return data
        return None

    def _queue(self, data: bytes | memoryview, end_stream: bool) -> None:
        if data:
            self._outbox.put(data)
        if end_stream:
            self._queue_end()
        if data or end_stream:
            self._queued()

    @property
    def buffered_bytes(self) -> int:
        """Queued by `send`, not yet handed to the transport."""
        return self._outbox.buffered_bytes

    async def drain(self, low_water_bytes: int = 0) -> None:
        """Return once `buffered_bytes <= low_water_bytes`; ExchangeClosed if the stream was
        reset first."""
        while True:
            if self._error is not None:
                raise self._error
            if self._outbox.buffered_bytes <= low_water_bytes:
                return
            await self._outbox.wait_below(low_water_bytes)

    def take(self, max_bytes: int) -> memoryview:
        """Up to `max_bytes` of the queued bytes, for one DATA frame."""
        return self._outbox.take(max_bytes)


class FrameSender(Protocol):
    """Where queued bytes go: h2's H2Connection, or an HTTP/3 stream's (agent.server.h3_wire)
    under the same two names."""

    def local_flow_control_window(self, stream_id: int, /) -> int:
        """Bytes the stream may send now."""
        ...

    def send_data(
        self, stream_id: int, data: bytes | memoryview, /, end_stream: bool = False
    ) -> None: ...


def send_queued_frame(
    conn: FrameSender,
    stream_id: int,
    exchange: QueuedExchange,
    max_frame_bytes: int,
    may_end: bool,
) -> tuple[int, bool] | None:
    """One DATA frame of what `exchange` queued, as large as the stream's and the connection's
    windows and `max_frame_bytes` allow, carrying END_STREAM when it holds the last queued bytes,
    the end was queued and `may_end` (not when trailers end the stream). The bytes sent and
    whether END_STREAM went with them; None when the windows allow nothing."""
    credit = min(conn.local_flow_control_window(stream_id), max_frame_bytes)
    if credit <= 0:
        return None
    chunk = exchange.take(credit)
    end = may_end and exchange.end_queued and not exchange.buffered_bytes
    conn.send_data(stream_id, chunk, end_stream=end)
    return len(chunk), end


def http2_code(value: int) -> ProtocolCode:
    """An HTTP/2 error code, as a peer error carries it (HTTP/3's and QUIC's: agent.h3.wire)."""
    return ProtocolCode.among("HTTP/2", value, ErrorCodes)


def error_code_name(code: int) -> str:
    """An RST_STREAM or GOAWAY error code as messages name it: INTERNAL_ERROR, or its number
    if RFC 9113 does not define it."""
    return http2_code(code).name or f"error code {code}"
