"""The fast path: the frame splitter and frame builders against hyperframe, the splitter against
h2's own frame reader (h2 fed every read whole) on hostile byte streams, and both endpoints run
with the fast path on and off (h2 judging every frame: the reference), fed the same bytes cut
into the same reads. They must write the same bytes and reach the same results, for valid peers
and for peers that overrun windows, send bad padding, wrong body lengths, odd WINDOW_UPDATEs
(zero, overflowing, reserved bit set, wrong length), frames longer than MAX_FRAME_SIZE, frames
on the wrong kind of stream, resets and header blocks split over CONTINUATION frames."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from h2.connection import H2Connection
from h2.exceptions import FrameTooLargeError, ProtocolError
from h2.settings import SettingCodes
from hpack import Encoder, NeverIndexedHeaderTuple
from hyperframe.frame import (
    FRAMES,
    ContinuationFrame,
    DataFrame,
    Frame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.client.connection import ClientConnection
from agent.h2.connection import h2_connection
from agent.h2.fastpath import (
    FRAME_HEADER_BYTES,
    MIN_FREE_BYTES,
    FrameReader,
    H2Internals,
    data_frame_header,
    window_increment,
    window_update_frame,
)
from agent.h2.flow import WINDOW_UPDATE_POLICIES, FlowControlOptions
from agent.h2.frames import CLIENT_PREFACE, FrameTally
from agent.server.app import ServerApp, ServerOptions
from agent.server.connection import ServerConnection
from agent.trial_log import TrialLog
from agent.workloads.page.files import FileHandler

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def get_write_buffer_size(self) -> int:
        return 0


def feed(protocol: asyncio.BufferedProtocol, data: bytes, cuts: list[int]) -> int:
    """Deliver `data` as reads ending at `cuts`, each as large as the buffer offered allows,
    until the protocol closes the transport; returns how many bytes it was given."""
    transport = protocol.transport  # type: ignore[attr-defined]
    bounds = sorted({c for c in cuts if 0 < c < len(data)} | {len(data)})
    position = 0
    for bound in bounds:
        while position < bound and not transport.closed:
            buffer = protocol.get_buffer(-1)
            size = min(len(buffer), bound - position)
            buffer[:size] = data[position : position + size]
            position += size
            protocol.buffer_updated(size)
    return position


def check_tallies(
    connection: ClientConnection | ServerConnection, received: bytes, sent: bytes, server: bool
) -> tuple[dict[str, object], dict[str, object]]:
    """The connection's frame counts equal a plain FrameTally's walk of the bytes on the wire
    (all sent; all received but a frame still incomplete in the read buffer)."""
    reader = connection._reader
    complete = received[: len(received) - (reader.end - reader.start)]
    truth_in, truth_out = FrameTally(expect_preface=server), FrameTally(expect_preface=not server)
    truth_in.feed(complete)
    truth_out.feed(sent)
    counted = connection.tally_in.counts().to_dict(), connection.tally_out.counts().to_dict()
    assert counted == (truth_in.counts().to_dict(), truth_out.counts().to_dict())
    return counted


# frame builders and the splitter --------------------------------------------------------------


@given(st.integers(0, 2**31 - 1), st.integers(1, 2**31 - 1))
def test_window_update_frame_is_hyperframes(stream_id: int, increment: int) -> None:
    expected = WindowUpdateFrame(stream_id, window_increment=increment).serialize()
    frame = window_update_frame(stream_id, increment)
    assert frame == expected
    assert window_increment(bytearray(frame), 9) == increment


def test_window_update_frame_refuses_out_of_range_increments() -> None:
    for increment in (0, 2**31):
        with pytest.raises(ValueError, match="increment"):
            window_update_frame(1, increment)


@given(st.integers(1, 2**31 - 1), st.integers(0, 2**24 - 1), st.booleans())
def test_data_frame_header_is_hyperframes(stream_id: int, size: int, end: bool) -> None:
    frame = DataFrame(stream_id, data=b"\0" * min(size, 64), flags=["END_STREAM"] if end else [])
    expected = bytearray(frame.serialize()[:9])
    expected[0:3] = size.to_bytes(3, "big")
    assert data_frame_header(stream_id, size, end) == bytes(expected)


def _stream_for(kind: int, stream_id: int) -> int:
    """`stream_id` made legal for a frame of `kind` (the reserved bit left as drawn)."""
    if kind in FRAMES and FRAMES[kind].stream_association == "no-stream":
        return stream_id & 0x80000000
    if kind in FRAMES and FRAMES[kind].stream_association == "has-stream":
        return stream_id if stream_id & 0x7FFFFFFF else stream_id | 1
    return stream_id


def frame_strategy(max_payload: int) -> st.SearchStrategy[bytes]:
    """Any well-formed frame header: any type and flags, a stream its type allows."""
    return st.builds(
        lambda kind, flags, stream_id, payload: (
            len(payload).to_bytes(3, "big")
            + bytes([kind, flags])
            + _stream_for(kind, stream_id).to_bytes(4, "big")
            + payload
        ),
        st.integers(0, 12),
        st.integers(0, 255),
        st.integers(0, 2**32 - 1),
        st.binary(max_size=max_payload),
    )


def read_all(
    reader: FrameReader, data: bytes, cuts: list[int]
) -> tuple[list[tuple[int, int, int, bytes, bytes]], bytes, ProtocolError | None]:
    """Frames as (type, flags, stream id, payload, raw), the preface bytes for h2, and the
    error the reader refused the stream with (reading stops there)."""
    frames: list[tuple[int, int, int, bytes, bytes]] = []
    preface = bytearray()
    bounds = sorted({c for c in cuts if 0 < c < len(data)} | {len(data)})
    position = 0
    for bound in bounds:
        while position < bound:
            buffer = reader.get_buffer()
            size = min(len(buffer), bound - position)
            buffer[:size] = data[position : position + size]
            position += size
            reader.commit(size)
            if reader.preface_left:
                preface += reader.take_preface()
            try:
                while (frame := reader.next_frame()) is not None:
                    kind, flags, stream_id, start, length = frame
                    payload = bytes(reader.buffer[start : start + length])
                    frames.append((kind, flags, stream_id, payload, reader.raw()))
            except ProtocolError as exc:
                return frames, bytes(preface), exc
    return frames, bytes(preface), None


@settings(max_examples=200)
@given(
    st.lists(frame_strategy(700), max_size=12),
    st.lists(st.integers(0, 9000), max_size=8),
    st.sampled_from([64, 256, 4096]),
    st.sampled_from([1, 100, MIN_FREE_BYTES]),
)
def test_reader_yields_every_frame_whole_and_in_order(
    frames: list[bytes], cuts: list[int], capacity: int, min_free: int
) -> None:
    reader = FrameReader(max_frame_size=16384, capacity=capacity, min_free=min_free)
    got, passed, error = read_all(reader, b"".join(frames), cuts)
    assert passed == b"" and error is None
    assert [raw for *_, raw in got] == frames
    for (kind, flags, stream_id, payload, _raw), frame in zip(got, frames, strict=True):
        assert (kind, flags, payload) == (frame[3], frame[4], frame[9:])
        assert stream_id == int.from_bytes(frame[5:9], "big") & 0x7FFFFFFF
    assert reader.start == reader.end


@given(
    st.lists(frame_strategy(300), max_size=4),
    st.integers(301, 2**24 - 1),
    st.binary(max_size=400),
    st.lists(st.integers(0, 2000), max_size=6),
)
def test_an_oversize_frame_is_refused_on_its_header(
    before: list[bytes], declared: int, rest: bytes, cuts: list[int]
) -> None:
    """Whatever it declares and however much of it has come, a frame longer than
    MAX_FRAME_SIZE is refused as soon as its 9-byte header is in: nothing of it is buffered."""
    oversize = declared.to_bytes(3, "big") + b"\x06\0\0\0\0\0"
    data = b"".join(before) + oversize + rest
    reader = FrameReader(max_frame_size=300, capacity=128)
    got, _preface, error = read_all(reader, data, cuts)
    assert [raw for *_, raw in got] == before
    assert isinstance(error, FrameTooLargeError)
    assert error.error_code == 6  # FRAME_SIZE_ERROR
    assert len(reader.buffer) <= max(128, 2 * (FRAME_HEADER_BYTES + 300 + MIN_FREE_BYTES))


def test_a_frame_on_the_wrong_kind_of_stream_is_refused_on_its_header() -> None:
    """As h2's reader does (hyperframe checks it in the header): DATA needs a stream, PING
    must not have one."""
    for header in (b"\0\0\x10\x00\0\0\0\0\0", b"\0\0\x08\x06\0\0\0\0\x01"):
        reader = FrameReader(max_frame_size=16384)
        _got, _preface, error = read_all(reader, header, [])
        assert type(error) is ProtocolError
        assert error.error_code == 1  # PROTOCOL_ERROR
        assert "invalid header" in str(error)


@given(st.lists(st.integers(0, 100), max_size=5))
def test_the_preface_goes_to_h2_and_frames_follow(cuts: list[int]) -> None:
    ping = PingFrame(0, opaque_data=b"12345678").serialize()
    reader = FrameReader(max_frame_size=16384, preface_bytes=len(CLIENT_PREFACE))
    got, passed, error = read_all(reader, CLIENT_PREFACE + ping, cuts)
    assert passed == CLIENT_PREFACE and error is None
    assert [raw for *_, raw in got] == [ping]


def test_a_header_block_lasts_until_end_headers() -> None:
    reader = FrameReader(max_frame_size=16384)
    headers = HeadersFrame(1, data=b"a").serialize()
    continuation = ContinuationFrame(1, data=b"b").serialize()
    last = ContinuationFrame(1, data=b"c", flags=["END_HEADERS"]).serialize()
    states = []
    for frame in (headers, continuation, last):
        reader.get_buffer()[: len(frame)] = frame
        reader.commit(len(frame))
        assert reader.next_frame() is not None
        reader.raw()
        states.append(reader.header_block)
    assert states == [True, True, False]


def test_the_installed_h2_has_what_the_fast_path_uses() -> None:
    assert H2Internals.available()


# the splitter against h2's own reader, on hostile streams -------------------------------------

MAX_FRAME = 16384  # the server's SETTINGS_MAX_FRAME_SIZE in these streams (the protocol's)


def raw_frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return (
        len(payload).to_bytes(3, "big")
        + bytes([kind, flags])
        + stream_id.to_bytes(4, "big")
        + payload
    )


@st.composite
def hostile_frame(draw: st.DrawFn) -> bytes:
    pick = draw(st.integers(0, 9))
    stream_id = draw(st.sampled_from([0, 1, 3, 2**31 + 1]))
    if pick == 0:
        return PingFrame(0, opaque_data=b"pingpong").serialize()
    if pick == 1:
        return SettingsFrame(0, flags=draw(st.sampled_from([[], ["ACK"]]))).serialize()
    if pick == 2:  # any increment: zero, overflowing, reserved bit set
        increment = draw(st.integers(0, 2**32 - 1))
        return raw_frame(0x8, 0, stream_id, increment.to_bytes(4, "big"))
    if pick == 3:  # longer than MAX_FRAME_SIZE, all of it sent
        size = draw(st.integers(MAX_FRAME + 1, MAX_FRAME + 300))
        return raw_frame(
            draw(st.integers(0, 12)), draw(st.integers(0, 255)), stream_id, bytes(size)
        )
    if pick == 4:  # exactly MAX_FRAME_SIZE, of a type h2 ignores
        return raw_frame(0x20, 0, 0, bytes(MAX_FRAME))
    if pick == 5:  # a frame of a known type with the wrong length or on the wrong stream
        kind = draw(st.sampled_from([0x3, 0x4, 0x6, 0x7, 0x8, 0x2]))
        return raw_frame(kind, draw(st.integers(0, 255)), stream_id, draw(st.binary(max_size=12)))
    return raw_frame(
        draw(st.integers(0, 255)),
        draw(st.integers(0, 255)),
        stream_id,
        draw(st.binary(max_size=40)),
    )


@dataclass(frozen=True)
class Verdict:
    refused_in_read: int | None  # the read during which the stream was refused
    error: tuple[type[ProtocolError], int] | None
    written: bytes


def _h2_server() -> H2Connection:
    conn = h2_connection(client_side=False, settings={})
    conn.initiate_connection()
    return conn


def h2_alone(reads: list[bytes]) -> Verdict:
    conn = _h2_server()
    for index, data in enumerate(reads):
        try:
            conn.receive_data(data)
        except ProtocolError as exc:
            return Verdict(index, (type(exc), exc.error_code), conn.data_to_send())
    return Verdict(None, None, conn.data_to_send())


def h2_behind_reader(reads: list[bytes], capacity: int) -> Verdict:
    """What the endpoints do: the reader splits, h2 judges each frame; a stream the reader
    refuses gets the GOAWAY h2 would have sent."""
    conn = _h2_server()
    reader = FrameReader(conn.max_inbound_frame_size, len(CLIENT_PREFACE), capacity=capacity)
    bound = max(capacity, 2 * (FRAME_HEADER_BYTES + MAX_FRAME + MIN_FREE_BYTES))
    for index, data in enumerate(reads):
        position = 0
        while position < len(data):
            buffer = reader.get_buffer()
            assert len(reader.buffer) <= bound  # nothing beyond one legal frame is buffered
            size = min(len(buffer), len(data) - position)
            buffer[:size] = data[position : position + size]
            position += size
            reader.commit(size)
            try:
                if reader.preface_left:
                    conn.receive_data(reader.take_preface())
                while True:
                    try:
                        frame = reader.next_frame()
                    except ProtocolError as exc:
                        conn.close_connection(exc.error_code)  # h2 never saw this frame
                        raise
                    if frame is None:
                        break
                    conn.receive_data(reader.raw())
            except ProtocolError as exc:
                return Verdict(index, (type(exc), exc.error_code), conn.data_to_send())
    return Verdict(None, None, conn.data_to_send())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(hostile_frame(), max_size=8),
    st.booleans(),
    st.lists(st.integers(0, 40000), max_size=8),
    st.sampled_from([64, 4096, 256 * 1024]),
)
def test_the_reader_judges_as_h2s_own_reader_and_never_later(
    frames: list[bytes], bad_preface: bool, cuts: list[int], capacity: int
) -> None:
    """Every check h2's reader makes, the reader in front of it makes too, with the same error
    code and the same bytes written, in the same read; except that a frame longer than
    MAX_FRAME_SIZE is refused on its header where h2 alone waits for the whole payload."""
    preface = CLIENT_PREFACE[:-1] + b"?" if bad_preface else CLIENT_PREFACE
    data = preface + SettingsFrame(0).serialize() + b"".join(frames)
    bounds = sorted({c for c in cuts if 0 < c < len(data)} | {len(data)})
    reads = [data[a:b] for a, b in zip([0, *bounds], bounds, strict=False)]
    alone, behind = h2_alone(reads), h2_behind_reader(reads, capacity)
    assert behind.error == alone.error
    assert behind.written == alone.written
    if behind.error is not None and behind.error[0] is FrameTooLargeError:
        assert behind.refused_in_read is not None and alone.refused_in_read is not None
        assert behind.refused_in_read <= alone.refused_in_read
    else:
        assert behind.refused_in_read == alone.refused_in_read


def test_h2_alone_buffers_an_oversize_frame_the_reader_refuses() -> None:
    """Why the reader checks the length itself: h2 4.x's reader waits for the whole payload
    of a frame before it compares the length with MAX_FRAME_SIZE."""
    start = CLIENT_PREFACE + SettingsFrame(0).serialize()
    reads = [start, (2**24 - 1).to_bytes(3, "big") + b"\x06\0\0\0\0\0" + bytes(100_000)]
    assert h2_alone(reads).error is None
    behind = h2_behind_reader(reads, 4096)
    assert behind.error == (FrameTooLargeError, 6)
    assert behind.written.endswith(b"\0\0\0\0\0\0\0\0\0\x06")  # GOAWAY FRAME_SIZE_ERROR


# the client: fast path on and off, same server bytes -----------------------------------------


@dataclass(frozen=True)
class ClientCase:
    window: int
    connection_window: int
    policy: str
    server_bytes: bytes
    cuts: list[int]


def _headers(stream_id: int, length: int | None, split: bool) -> list[Frame]:
    fields = [(":status", "200"), ("content-type", "image/jpeg")]
    if length is not None:
        fields.append(("content-length", str(length)))
    # Never indexed: header blocks stay decodable in whatever order the streams interleave.
    block = Encoder().encode([NeverIndexedHeaderTuple(name, value) for name, value in fields])
    if not split:
        return [HeadersFrame(stream_id, data=block, flags=["END_HEADERS"])]
    return [
        HeadersFrame(stream_id, data=block[:3]),
        ContinuationFrame(stream_id, data=block[3:], flags=["END_HEADERS"]),
    ]


@st.composite
def body_frames(draw: st.DrawFn, stream_id: int, window: int) -> list[Frame]:
    size = draw(st.integers(0, 3 * window + 10))
    seed = draw(st.integers(0, 255))
    body = bytes((seed + 7 * i) % 256 for i in range(size))
    frames: list[Frame] = []
    offset = 0
    while True:
        chunk = draw(st.integers(0, min(window, 2000)))
        piece = body[offset : offset + chunk]
        offset += len(piece)
        last = offset >= len(body) or len(frames) > 40
        frame = DataFrame(stream_id, data=piece, flags=["END_STREAM"] if last else [])
        if draw(st.integers(0, 9)) == 0:
            frame.flags.add("PADDED")
            frame.pad_length = draw(st.integers(0, 12))
        frames.append(frame)
        if last:
            return frames


@st.composite
def client_cases(draw: st.DrawFn) -> ClientCase:
    window = draw(st.sampled_from([1, 17, 100, 255, 1000, 4095]))
    connection_window = draw(st.sampled_from([1, 255, 5000, 65535, 100000]))
    # Units of frames that stay together: a header block, then each DATA frame of the body.
    per_stream: list[list[list[Frame]]] = []
    for stream_id in (1, 3):
        body = draw(body_frames(stream_id, window))
        size = sum(len(f.data) for f in body)  # type: ignore[attr-defined]
        declared = draw(st.sampled_from([size, size, size, None, size + 1, max(0, size - 1)]))
        headers = _headers(stream_id, declared, split=draw(st.booleans()))
        per_stream.append([headers, *([frame] for frame in body)])
    extras: list[Frame | bytes] = [
        PingFrame(0, opaque_data=b"pingpong"),
        SettingsFrame(0, settings={SettingsFrame.MAX_CONCURRENT_STREAMS: 50}),
        WindowUpdateFrame(0, window_increment=1000),
        PriorityFrame(3, depends_on=1, stream_weight=10),
        RstStreamFrame(3, error_code=8),
        DataFrame(5, data=b"late", flags=["END_STREAM"]),
    ]
    hostile = [
        raw_frame(0x0, 0, 1, bytes(MAX_FRAME + 1)),  # longer than the client's MAX_FRAME_SIZE
        raw_frame(0x0, 0, 1, bytes(MAX_FRAME + 1))[:200],  # the same, only begun
        raw_frame(0x0, 0x1, 0, b"x"),  # DATA on stream 0
        raw_frame(0x6, 0, 1, b"pingpong"),  # PING on a stream
        raw_frame(0x8, 0, 1, (2**31 + 5).to_bytes(4, "big")),  # reserved bit in the increment
        raw_frame(0x0, 0x8, 1, b""),  # PADDED without a pad length
    ]
    if draw(st.integers(0, 4)) == 0:
        extras.append(draw(st.sampled_from(hostile)))  # type: ignore[arg-type]
    chosen: list[list[Frame | bytes]] = [
        [frame] for frame in draw(st.lists(st.sampled_from(extras), max_size=2))
    ]
    order = draw(st.lists(st.integers(0, 2), max_size=200))
    queues: list[list[list[Frame | bytes]]] = [per_stream[0], per_stream[1], chosen]  # type: ignore[list-item]
    frames: list[Frame | bytes] = [SettingsFrame(0)]
    for pick in order + [0] * 100 + [1] * 100 + [2] * 5:
        if queues[pick]:
            frames += queues[pick].pop(0)
    data = b"".join(f if isinstance(f, bytes) else f.serialize() for f in frames)
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=10))
    policy = draw(st.sampled_from(WINDOW_UPDATE_POLICIES))
    return ClientCase(window, connection_window, policy, data, cuts)


def run_client(case: ClientCase, fast: bool) -> tuple[object, ...]:
    async def scenario() -> tuple[object, ...]:
        flow = FlowControlOptions(case.connection_window, case.policy)  # type: ignore[arg-type]
        client = ClientConnection({"initial_window_size": case.window}, flow, fast_path=fast)
        transport = FakeTransport()
        client.connection_made(transport)
        futures = [client.request("x:1", "http", f"/{name}", [], keep_body=True) for name in "ab"]
        given = feed(client, case.server_bytes, case.cuts)
        tallies = check_tallies(
            client, case.server_bytes[:given], bytes(transport.written), server=False
        )
        outcomes: list[object] = []
        for future in futures:
            if not future.done():
                outcomes.append("pending")
            elif future.exception() is not None:
                outcomes.append(str(future.exception()))
            else:
                response = future.result()
                assert response.body is not None
                outcomes.append((response.status, bytes(response.body), response.size_bytes))
        client.connection_lost(None)
        written = bytes(transport.written)
        return (written, transport.closed, client.window_updates_sent, outcomes, tallies)

    return asyncio.run(scenario())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(client_cases())
def test_client_fast_path_matches_h2_alone(case: ClientCase) -> None:
    assert run_client(case, fast=True) == run_client(case, fast=False)


def test_client_fast_path_receives_a_body_and_credits_it() -> None:
    body = bytes(range(256)) * 8
    frames: list[Frame] = [SettingsFrame(0), *_headers(1, len(body), split=False)]
    frames += [DataFrame(1, data=body[i : i + 100]) for i in range(0, len(body), 100)]
    frames.append(DataFrame(1, flags=["END_STREAM"]))
    frames += [*_headers(3, 0, split=False), DataFrame(3, flags=["END_STREAM"])]
    case = ClientCase(256, 256, "half", b"".join(f.serialize() for f in frames), [])
    _written, closed, updates, outcomes, _tallies = run_client(case, fast=True)
    assert not closed
    assert outcomes == [(200, body, len(body)), (200, b"", 0)]
    assert updates > 0


def test_client_refuses_data_beyond_its_window() -> None:
    frames: list[Frame] = [SettingsFrame(0), *_headers(1, None, split=False)]
    frames.append(DataFrame(1, data=b"x" * 257))
    case = ClientCase(256, 65535, "half", b"".join(f.serialize() for f in frames), [])
    written, closed, _updates, outcomes, _tallies = run_client(case, fast=True)
    assert closed
    assert outcomes[0] == (
        "server broke HTTP/2: FlowControlError: Flow control window shrunk below 0 "
        "(HTTP/2 FLOW_CONTROL_ERROR 0x3)"
    )
    # GOAWAY with FLOW_CONTROL_ERROR (0x3) closes what the client wrote.
    assert written[-17:-8] == b"\0\0\x08\x07\0\0\0\0\0" and written[-4:] == b"\0\0\0\x03"


# the server: fast path on and off, same client bytes -------------------------------------------


@pytest.fixture(scope="module")
def small_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fastpath-site")
    for name, size in (("a.bin", 5000), ("b.bin", 777), ("c.bin", 0), ("d.bin", 40000)):
        (root / name).write_bytes(bytes(i % 251 for i in range(size)))
    return root


@dataclass(frozen=True)
class ServerCase:
    client_bytes: bytes
    cuts: list[int]


@st.composite
def server_cases(draw: st.DrawFn) -> ServerCase:
    window = draw(st.sampled_from([1, 17, 255, 1000, 65535]))
    frame_size = draw(st.sampled_from([16384, 20000]))
    client = h2_connection(
        client_side=True,
        settings={
            SettingCodes.INITIAL_WINDOW_SIZE: window,
            SettingCodes.MAX_FRAME_SIZE: frame_size,
        },
    )
    client.initiate_connection()
    stream_ids = []
    for path, method in draw(
        st.lists(
            st.sampled_from(
                [
                    ("/a.bin", "GET"),
                    ("/b.bin", "GET"),
                    ("/c.bin", "GET"),
                    ("/d.bin", "GET"),
                    ("/b.bin", "HEAD"),
                    ("/missing", "GET"),
                ]
            ),
            min_size=1,
            max_size=4,
        )
    ):
        stream_id = client.get_next_available_stream_id()
        client.send_headers(
            stream_id,
            [(":method", method), (":scheme", "http"), (":authority", "x"), (":path", path)],
            end_stream=True,
        )
        stream_ids.append(stream_id)
    data = bytearray(client.data_to_send())
    # Mostly what a client sends while the bodies flow; now and then what h2 must answer.
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 104))
        target = draw(st.sampled_from([0, *stream_ids]))
        if kind < 90:
            data += window_update_frame(target, draw(st.integers(1, 70000)))
        elif kind == 90:
            data += window_update_frame(99, 1)  # an idle stream
        elif kind == 91:
            data += b"\0\0\x04\x08\0" + target.to_bytes(4, "big") + b"\0\0\0\0"  # zero
        elif kind == 92:
            data += window_update_frame(target, 2**31 - 1)  # overflow
        elif kind == 93:
            data += b"\0\0\x05\x08\0" + target.to_bytes(4, "big") + b"\0\0\0\x01\0"
        elif kind == 94 and target:
            data += RstStreamFrame(target, error_code=8).serialize()
        elif kind == 95:
            initial = {SettingsFrame.INITIAL_WINDOW_SIZE: draw(st.integers(0, 70000))}
            data += SettingsFrame(0, settings=initial).serialize()
        elif kind == 96:
            data += SettingsFrame(0, flags=["ACK"]).serialize()
        elif kind == 100:  # the increment's reserved bit set: hyperframe refuses it
            increment = 2**31 + draw(st.integers(1, 70000))
            data += raw_frame(0x8, 0, target, increment.to_bytes(4, "big"))
        elif kind == 101:  # longer than MAX_FRAME_SIZE, whole or only begun
            oversize = raw_frame(
                draw(st.sampled_from([0x0, 0x6, 0x8, 0x20])), 0, target, bytes(MAX_FRAME + 1)
            )
            data += oversize[: draw(st.sampled_from([9, 100, len(oversize)]))]
        elif kind == 102:  # the wrong kind of stream
            data += raw_frame(0x6, 0, 1, b"12345678") if target == 0 else raw_frame(0x0, 0, 0, b"x")
        elif kind == 103:
            data += b"\0\0\x03\x08\0" + target.to_bytes(4, "big") + b"\0\0\x01"  # short
        elif kind == 104:
            data += raw_frame(0x20, 0xFF, target, b"extension")
        else:
            data += PingFrame(0, opaque_data=b"12345678").serialize()
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=12))
    return ServerCase(bytes(data), cuts)


def run_server(site: Path, case: ServerCase, fast: bool) -> tuple[object, ...]:
    async def scenario() -> tuple[object, ...]:
        app = ServerApp(ServerOptions(), TrialLog(None, io.StringIO()), FileHandler(site))
        server = ServerConnection(app, 1, fast_path=fast)
        transport = FakeTransport()
        server.connection_made(transport)
        given = feed(server, case.client_bytes, case.cuts)
        written = bytes(transport.written)
        tallies = check_tallies(server, case.client_bytes[:given], written, server=True)
        server.connection_lost(None)
        return written, transport.closed, app.hostile_connections, tallies

    return asyncio.run(scenario())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=server_cases())
def test_server_fast_path_matches_h2_alone(small_site: Path, case: ServerCase) -> None:
    assert run_server(small_site, case, fast=True) == run_server(small_site, case, fast=False)


def test_server_fast_path_sends_within_windows(small_site: Path) -> None:
    """A client granting 100 bytes at a time gets 100-byte DATA frames, the body whole."""
    client = h2_connection(client_side=True, settings={SettingCodes.INITIAL_WINDOW_SIZE: 100})
    client.initiate_connection()
    client.send_headers(
        1,
        [(":method", "GET"), (":scheme", "http"), (":authority", "x"), (":path", "/a.bin")],
        end_stream=True,
    )
    preamble = client.data_to_send()

    async def scenario() -> bytes:
        app = ServerApp(ServerOptions(), TrialLog(None, io.StringIO()), FileHandler(small_site))
        server = ServerConnection(app, 1)
        transport = FakeTransport()
        server.connection_made(transport)
        feed(server, preamble, [])
        body = bytearray()
        while True:
            events = client.receive_data(bytes(transport.written))
            transport.written.clear()
            for event in events:
                if type(event).__name__ == "DataReceived":
                    assert len(event.data) <= 100
                    body.extend(event.data)
                    if event.stream_ended is None:
                        client.increment_flow_control_window(event.flow_controlled_length, 1)
                        client.increment_flow_control_window(event.flow_controlled_length)
                if type(event).__name__ == "StreamEnded":
                    return bytes(body)
            feed(server, client.data_to_send(), [])

    body = asyncio.run(scenario())
    assert body == (small_site / "a.bin").read_bytes()
