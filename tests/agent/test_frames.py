from __future__ import annotations

from hyperframe.frame import (
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)
from hypothesis import given
from hypothesis import strategies as st

from agent.h2.frames import CLIENT_PREFACE, FrameTally


def _frame(kind: int, size: int) -> Frame:
    if kind == 0:
        frame: Frame = DataFrame(1, data=b"x" * size)
    elif kind == 1:
        frame = HeadersFrame(1, data=b"h" * size)
    elif kind == 2:
        frame = SettingsFrame(0, settings={4: 65535})
    elif kind == 3:
        frame = WindowUpdateFrame(0, window_increment=size + 1)
    elif kind == 4:
        frame = RstStreamFrame(3, error_code=8)
    elif kind == 5:
        frame = PingFrame(0, opaque_data=b"12345678")
    else:
        frame = GoAwayFrame(0, last_stream_id=1, error_code=0)
    return frame


frames_st = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40000)), max_size=25)


@given(frames_st, st.lists(st.integers(1, 70000), max_size=30), st.booleans())
def test_counts_every_frame_whatever_the_chunking(
    spec: list[tuple[int, int]], cuts: list[int], preface: bool
) -> None:
    frames = [_frame(kind, size) for kind, size in spec]
    stream = (CLIENT_PREFACE if preface else b"") + b"".join(f.serialize() for f in frames)
    tally = FrameTally(expect_preface=preface)
    pos = 0
    for cut in cuts:
        tally.feed(memoryview(stream)[pos : pos + cut])
        pos = min(len(stream), pos + cut)
    tally.feed(stream[pos:])
    counts = tally.counts()
    expected: dict[str, int] = {}
    expected_bytes: dict[str, int] = {}
    for frame in frames:
        name = {
            0: "DATA",
            1: "HEADERS",
            4: "SETTINGS",
            8: "WINDOW_UPDATE",
            3: "RST_STREAM",
            6: "PING",
            7: "GOAWAY",
        }[frame.type]
        expected[name] = expected.get(name, 0) + 1
        expected_bytes[name] = expected_bytes.get(name, 0) + len(frame.serialize())
    assert counts.frames == expected
    assert counts.frame_bytes == expected_bytes
    assert counts.bytes_total == len(stream)


def test_unknown_frame_types_are_named_and_counted() -> None:
    tally = FrameTally()
    tally.feed(bytes([0, 0, 2, 0xFA, 0, 0, 0, 0, 0, 1, 2]))
    assert tally.counts().frames == {"UNKNOWN_0xfa": 1}


def test_minus_gives_what_happened_since_a_snapshot() -> None:
    tally = FrameTally()
    tally.feed(_frame(0, 10).serialize())
    before = tally.counts()
    tally.feed(_frame(3, 1).serialize())
    delta = tally.counts().minus(before)
    assert delta.frames == {"WINDOW_UPDATE": 1}
    assert delta.bytes_total == 13
