"""The agent's short cuts through qh3 (agent.h3.stack): a response body's chunks taken inside
their DATA frame, the core's events handed over in order, the datagrams polled in runs to one
address, the tap's cached methods. Each is checked against what qh3's own path does."""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections import deque
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from qh3.h3.connection import H3Connection
from qh3.h3.events import DataReceived, H3Event, HeadersReceived
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection, QuicConnectionError
from qh3.quic.events import StreamDataReceived

from agent.client.h3_protocol import QuicClientProtocol
from agent.h3.credit import CreditLedger
from agent.h3.stack import (
    CAPACITY_EXHAUSTED,
    CoreTap,
    StreamDataTaker,
    TransportCounts,
    inside_data_frame,
    tap,
)
from agent.h3.udp import DrainingTransport, datagram_transport, udp_socket

STREAM = 0
# A HEADERS frame whose field section is the QPACK static table's ":status: 200" alone.
HEADERS_200 = b"\x01\x03\x00\x00\xd9"
# Trailers: the static table's "age: 0" (a trailer section has no pseudo-header).
TRAILERS = b"\x01\x03\x00\x00\xc2"


def _varint(value: int) -> bytes:
    if value < 0x40:
        return bytes([value])
    if value < 0x4000:
        return (value | 0x4000).to_bytes(2, "big")
    return (value | 0x80000000).to_bytes(4, "big")


def _data_frame(payload: bytes) -> bytes:
    return b"\x00" + _varint(len(payload)) + payload


def _client_h3() -> H3Connection:
    return H3Connection(QuicConnection(configuration=QuicConfiguration(is_client=True)))


def _chunks(wire: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    return [wire[a:b] for a, b in pairwise(points)]


def _through_qh3(h3: H3Connection, chunk: bytes, end: bool) -> list[H3Event]:
    return h3.handle_event(StreamDataReceived(data=chunk, end_stream=end, stream_id=STREAM))


def _collect(events: list[H3Event], body: bytearray, seen: list[tuple[str, bool]]) -> None:
    for event in events:
        if isinstance(event, DataReceived):
            body += event.data
            if event.stream_ended:
                seen.append(("end", True))
        elif isinstance(event, HeadersReceived):
            seen.append(("headers", event.stream_ended))


@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=5),
    trailers=st.booleans(),
    cuts=st.lists(st.integers(0, 4000), max_size=40),
)
def test_body_chunks_taken_inside_their_frame_are_what_qh3_would_deliver(
    bodies: list[bytes], trailers: bool, cuts: list[int]
) -> None:
    """A response cut anywhere, fed to qh3's layer alone and to the short cut first: the same
    body bytes in the same order, the same headers, trailers and end, and the layer's state
    left as qh3 leaves it (every later frame parses as before)."""
    wire = HEADERS_200 + b"".join(map(_data_frame, bodies)) + (TRAILERS if trailers else b"")
    chunks = _chunks(wire, cuts)
    plain, short = _client_h3(), _client_h3()
    plain_body, short_body = bytearray(), bytearray()
    plain_seen: list[tuple[str, bool]] = []
    short_seen: list[tuple[str, bool]] = []
    for index, chunk in enumerate(chunks):
        end = index == len(chunks) - 1
        _collect(_through_qh3(plain, chunk, end), plain_body, plain_seen)
        if inside_data_frame(short, STREAM, len(chunk), end):
            short_body += chunk
        else:
            _collect(_through_qh3(short, chunk, end), short_body, short_seen)
    assert bytes(short_body) == bytes(plain_body) == b"".join(bodies)
    assert short_seen == plain_seen
    assert not short._is_done and not plain._is_done


def test_a_chunk_inside_a_long_frame_is_taken_and_its_end_is_not() -> None:
    h3 = _client_h3()
    _through_qh3(h3, HEADERS_200 + b"\x00" + _varint(1000) + b"a" * 100, False)
    assert inside_data_frame(h3, STREAM, 800, False)
    assert not inside_data_frame(h3, STREAM, 100, False)  # the frame's last bytes: qh3's
    assert not inside_data_frame(h3, STREAM, 50, True)  # the stream's end: qh3's
    assert not inside_data_frame(h3, 4, 10, False)  # a stream qh3 has not seen
    events = _through_qh3(h3, b"b" * 100, True)
    assert [e.data for e in events if isinstance(e, DataReceived)] == [b"b" * 100]


class _FakeCore:
    """A native core whose events, transmits and failures a test sets."""

    def __init__(self, events: list[tuple[Any, ...]], transmits: list[Any]) -> None:
        self.events = deque(events)
        self.transmits = deque(transmits)
        self.loss_total = 0

    def receive_many_datagrams(self, datagrams: list[bytes], addr: Any, now: float) -> None:
        pass

    def next_event(self) -> tuple[Any, ...] | None:
        return self.events.popleft() if self.events else None

    def poll_transmit(self, now: float) -> tuple[Any, ...] | None:
        if not self.transmits:
            return None
        transmit = self.transmits.popleft()
        if isinstance(transmit, RuntimeError):
            raise transmit
        return tuple(transmit)

    def get_send_buffer_size(self, stream_id: int | None = None) -> int:
        return 0


A, B = ("127.0.0.1", 1), ("127.0.0.1", 2)


def test_transmits_come_in_runs_to_one_address_counted_once() -> None:
    counts = TransportCounts()
    core = _FakeCore([], [(b"x" * 10, A, 0), (b"y" * 20, A, 0), (b"z" * 5, B, 0), (b"w", A, 0)])
    batches = CoreTap(core, CreditLedger(), counts, False).transmits(0.0)  # type: ignore[arg-type]
    assert batches == [(A, [b"x" * 10, b"y" * 20]), (B, [b"z" * 5]), (A, [b"w"])]
    assert (counts.datagrams_sent, counts.bytes_sent) == (4, 36)


def test_exhausted_capacity_ends_the_transmits_with_what_was_built() -> None:
    counts = TransportCounts()
    core = _FakeCore([], [(b"x", A, 0), RuntimeError(CAPACITY_EXHAUSTED), (b"y", A, 0)])
    tapped = CoreTap(core, CreditLedger(), counts, True)  # type: ignore[arg-type]
    assert tapped.transmits(0.0) == [(A, [b"x"])]
    assert (counts.datagrams_sent, counts.capacity_blocked) == (1, 1)
    other = CoreTap(_FakeCore([], [RuntimeError("other")]), CreditLedger(), counts, True)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="other"):
        other.transmits(0.0)


def test_the_tap_keeps_the_cores_methods_not_its_values() -> None:
    core = _FakeCore([], [])
    tapped = CoreTap(core, CreditLedger(), TransportCounts(), False)  # type: ignore[arg-type]
    assert tapped.receive_many_datagrams == core.receive_many_datagrams
    assert "receive_many_datagrams" in vars(tapped)
    core.loss_total = 3
    assert tapped.loss_total == 3
    core.loss_total = 4
    assert tapped.loss_total == 4 and "loss_total" not in vars(tapped)


def _taker(taken: list[bytes], streams: set[int]) -> StreamDataTaker:
    """Takes the data of `streams` into `taken`, declines the rest."""

    def take(stream_id: int, data: bytes, end_stream: bool) -> bool:
        if stream_id not in streams:
            return False
        taken.append(data)
        return True

    return take


def _connected(core: _FakeCore, credit: CreditLedger) -> Any:
    """A tapped connection past its handshake, over `core`."""
    quic = tap(QuicConnection(configuration=QuicConfiguration(is_client=True)), credit,
               TransportCounts(), False)  # fmt: skip
    quic._core = CoreTap(core, credit, quic.tap_counts, False)  # type: ignore[arg-type,assignment]
    quic._handshake_complete = True
    return quic


def test_stream_data_is_taken_in_order_until_another_event_then_qh3_has_the_rest() -> None:
    credit = CreditLedger()
    core = _FakeCore(
        [
            ("stream_data", 0, b"a", False),
            ("stream_data", 0, b"b", False),
            ("connection_credit", 5000),
            ("stream_data", 0, b"c", False),
            ("stream_reset", 4, 7),
        ],
        [],
    )
    quic = _connected(core, credit)
    quic.core._written_total = 1000  # the credit event is seen by the tap, held or not
    taken: list[bytes] = []
    quic.take_stream_data = _taker(taken, {0})
    quic.receive_many_datagrams([b"datagram"], A, 0.0)
    assert taken == [b"a", b"b"]
    events = list(quic._events)
    assert [type(e).__name__ for e in events] == ["StreamDataReceived", "StreamReset"]
    assert events[0].data == b"c"
    assert credit.summary().max_data_frames == 1
    assert credit.summary().largest_connection_credit_ahead_bytes == 4000


def test_declined_stream_data_is_qh3s_event_and_so_is_all_after_it() -> None:
    core = _FakeCore(
        [("stream_data", 0, b"a", False), ("stream_data", 3, b"s", False),
         ("stream_data", 0, b"b", True)],
        [],
    )  # fmt: skip
    quic = _connected(core, CreditLedger())
    taken: list[bytes] = []
    quic.take_stream_data = _taker(taken, {0})
    quic.receive_many_datagrams([b"datagram"], A, 0.0)
    assert taken == [b"a"]
    assert [(e.stream_id, e.data, e.end_stream) for e in quic._events] == [
        (3, b"s", False),
        (0, b"b", True),
    ]


def test_a_core_failure_on_receive_is_the_connections_as_in_qh3() -> None:
    class Failing(_FakeCore):
        def receive_many_datagrams(self, datagrams: list[bytes], addr: Any, now: float) -> None:
            raise RuntimeError("broken")

    quic = _connected(Failing([], []), CreditLedger())
    with pytest.raises(QuicConnectionError, match="broken"):
        quic.receive_many_datagrams([b"datagram"], A, 0.0)


def test_a_body_hashed_from_taken_chunks_matches_its_sha256() -> None:
    body = bytes(range(256)) * 40
    h3 = _client_h3()
    _through_qh3(h3, HEADERS_200 + b"\x00" + _varint(len(body)), False)
    digest = hashlib.sha256()
    for start in range(0, len(body) - 160, 160):
        chunk = body[start : start + 160]
        assert inside_data_frame(h3, STREAM, len(chunk), False)
        digest.update(chunk)
    rest = body[start + 160 :]
    for event in _through_qh3(h3, rest, True):
        if isinstance(event, DataReceived):
            digest.update(event.data)
    assert digest.hexdigest() == hashlib.sha256(body).hexdigest()


class _TimerCore(_FakeCore):
    """A core whose next deadline a test moves, recording when its timer is handled."""

    def __init__(self) -> None:
        super().__init__([], [])
        self.deadline: float | None = None
        self.handled: list[float] = []

    def get_timer(self) -> tuple[str, float] | None:
        return None if self.deadline is None else ("loss", self.deadline)

    def handle_timer(self, now: float) -> None:
        self.handled.append(now)


class _Transport:
    def sendto_many(self, datagrams: list[bytes], addr: Any = None) -> None:
        pass


def test_the_loop_timer_moves_only_sooner_and_a_timer_fired_early_looks_again() -> None:
    """qh3 re-schedules its loop timer whenever the core's deadline moves; ours only when it
    comes sooner, and an armed timer that fires before a deadline moved later re-arms for it
    instead of handing the core a timer that is not due."""

    async def run() -> None:
        core = _TimerCore()
        protocol = QuicClientProtocol(_connected(core, CreditLedger()), TransportCounts())
        protocol.connection_made(_Transport())  # type: ignore[arg-type]
        now = asyncio.get_running_loop().time()
        core.deadline = now + 10
        protocol.transmit()
        first = protocol._timer
        assert first is not None and protocol._timer_at == now + 10
        core.deadline = now + 20
        protocol.transmit()
        assert protocol._timer is first and not first.cancelled()
        core.deadline = now + 5
        protocol.transmit()
        assert first.cancelled() and protocol._timer_at == now + 5
        core.deadline = now + 30
        protocol._handle_timer()  # as if the timer for now + 5 fired
        assert core.handled == [] and protocol._timer_at == now + 30
        protocol._timer_at = core.deadline = now - 1  # due
        protocol._handle_timer()
        assert len(core.handled) == 1 and core.handled[0] >= now
        core.deadline = None
        protocol.transmit()
        assert protocol._timer is None

    asyncio.run(run())


class _Batches(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, list[bytes]]] = []

    def datagrams_received(self, data: list[bytes], addr: Any) -> None:
        self.calls.append((addr, data))


def test_the_transport_reads_what_is_queued_in_runs_per_sender_and_stops_at_a_short_read() -> None:
    """Everything queued before a wake-up is delivered in order, per run of one sender, in
    one call each; more than one batch read's worth (32 messages) is read on, not left."""

    async def run() -> None:
        receiver, _buffers = udp_socket("127.0.0.1", 0)
        address = receiver.getsockname()
        transport, protocol = await datagram_transport(_Batches, receiver)
        assert isinstance(protocol, _Batches) and isinstance(transport, DrainingTransport)
        one, two = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
        sent: list[bytes] = []
        try:
            for sender, count in ((one, 3), (two, 2), (one, 40)):
                for _ in range(count):
                    sent.append(b"%d" % len(sent))
                    sender.sendto(sent[-1], address)
            for _ in range(50):
                await asyncio.sleep(0.01)
                if sum(len(data) for _addr, data in protocol.calls) == len(sent):
                    break
            assert [data for _addr, batch in protocol.calls for data in batch] == sent
            senders = [addr[1] for addr, _batch in protocol.calls]
            assert senders == [one.getsockname()[1], two.getsockname()[1], one.getsockname()[1]]
        finally:
            one.close()
            two.close()
            transport.close()

    asyncio.run(run())
