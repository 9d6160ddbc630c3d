"""The sans-IO decoder: unit cases for each way a stream breaks, then property tests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.meter.decoder import FrameDecoder
from controller.meter.protocol import (
    Ack,
    Frame,
    FrameType,
    Info,
    Marker,
    Samples,
    Status,
    crc16,
    encode_device_frame,
    encode_frame,
)


def samples(seq: int, first: int, n: int = 4, channels: int = 2) -> Samples:
    values = (np.arange(n * channels, dtype=np.uint16) * 37 + first) % 1024
    return Samples(seq, first, values.reshape(n, channels))


def as_wire(frames: list[Frame]) -> list[bytes]:
    return [encode_device_frame(f) for f in frames]


def decode_all(data: bytes, chunk: int = 0) -> tuple[list[Frame], FrameDecoder]:
    decoder = FrameDecoder()
    out: list[Frame] = []
    if chunk:
        for i in range(0, len(data), chunk):
            out += decoder.feed(data[i : i + chunk])
    else:
        out += decoder.feed(data)
    out += decoder.flush()
    return out, decoder


def test_crc_check_value():
    assert crc16(b"123456789") == 0x29B1


def test_every_frame_type_round_trips():
    frames: list[Frame] = [
        Info(0, 1, 1, 2, 3, 1, 16_000_000, 10, 5000, 1000, 0x03, 1, 500_000, 2, "mega2560"),
        samples(1, 0),
        Marker(2, 123_456, 2, 1),
        Status(3, 1000, 5, 40, 1, True),
        Ack(4, FrameType.START, 7, 0),
    ]
    out, decoder = decode_all(b"".join(as_wire(frames)))
    assert as_wire(out) == as_wire(frames)
    assert decoder.stats.frames_ok == 5
    assert decoder.stats.bytes_discarded == 0
    assert isinstance(out[1], Samples)
    assert out[1].values.shape == (4, 2)
    assert not out[1].values.flags.writeable


def test_byte_by_byte_equals_all_at_once():
    frames: list[Frame] = [samples(k, 4 * k) for k in range(5)]
    wire = b"".join(as_wire(frames))
    assert as_wire(decode_all(wire, chunk=1)[0]) == as_wire(frames)


def test_garbage_before_and_between_frames_is_discarded_and_counted():
    a, b = as_wire([samples(0, 0), samples(1, 4)])
    garbage = b"\x00\xa5\xff\xa5\x5a\x10"
    out, decoder = decode_all(garbage + a + garbage + b)
    assert as_wire(out) == [a, b]
    assert decoder.stats.bytes_discarded == 2 * len(garbage)


def test_truncated_frame_is_skipped_and_the_next_one_recovered():
    a, b, c = as_wire([samples(0, 0), samples(1, 4), samples(2, 8)])
    out, decoder = decode_all(a + b[:9] + c, chunk=5)
    assert as_wire(out) == [a, c]
    assert decoder.stats.sequence_gaps == 1
    assert decoder.stats.frames_missed == 1


@pytest.mark.parametrize("bit", range(0, 8 * 25, 3))
def test_any_single_bit_flip_rejects_only_that_frame(bit: int):
    a, b, c = as_wire([samples(0, 0), samples(1, 4), samples(2, 8)])
    damaged = bytearray(b)
    damaged[bit // 8] ^= 1 << bit % 8
    out, decoder = decode_all(a + bytes(damaged) + c)
    assert as_wire(out) == [a, c]
    assert decoder.stats.frames_missed == 1


def test_oversized_length_is_a_length_error():
    bad = b"\xa5\x5a\x01\x04" + b"\x00" * 20
    (a,) = as_wire([samples(0, 0)])
    out, decoder = decode_all(bad + a)
    assert as_wire(out) == [a]
    assert decoder.stats.length_errors == 1


def test_a_truncated_frame_at_the_end_waits_then_flush_counts_it():
    (a,) = as_wire([samples(0, 0)])
    decoder = FrameDecoder()
    assert decoder.feed(a[:-1]) == []
    assert decoder.pending_bytes == len(a) - 1
    assert decoder.flush() == []
    assert decoder.stats.truncated_frames == 1
    assert decoder.stats.bytes_discarded == len(a) - 1


def test_long_claimed_length_hides_nothing_at_flush():
    """A damaged header claiming a long payload must not swallow the intact frame behind it."""
    header = encode_frame(FrameType.SAMPLES, 0, b"\x00" * 900)[:12]
    (b,) = as_wire([samples(1, 4)])
    out, decoder = decode_all(header + b)
    assert as_wire(out) == [b]
    assert decoder.stats.truncated_frames == 1


@pytest.mark.parametrize("chunk", [0, 1, 5])
def test_a_crc_that_passes_only_by_swallowing_an_intact_frame_is_rejected(chunk: int):
    """A damaged header's claimed length spans an intact frame, and the bytes after that frame
    happen to be the right CRC (once in 65536 on a noisy link; made so here): the candidate is
    rejected, counted as a CRC failure, and the frame inside it is recovered."""
    (inner,) = as_wire([samples(1, 4)])
    before, after = b"\x01\x02\x03", b"\x04\x05"
    length = len(before) + len(inner) + len(after)
    body = bytes([length & 0xFF, length >> 8, FrameType.SAMPLES, 0, 0]) + before + inner + after
    swallowing = b"\xa5\x5a" + body + crc16(body).to_bytes(2, "little")
    assert len(swallowing) == length + 9
    out, decoder = decode_all(swallowing, chunk=chunk)
    assert as_wire(out) == [inner]
    assert decoder.stats.crc_failures == 1
    assert decoder.stats.bytes_discarded == len(swallowing) - len(inner)
    assert decoder.stats.malformed_frames == 0


def test_sequence_wraps_without_a_gap():
    frames: list[Frame] = [samples(65534, 0), samples(65535, 4), samples(0, 8)]
    out, decoder = decode_all(b"".join(as_wire(frames)))
    assert as_wire(out) == as_wire(frames)
    assert (decoder.stats.sequence_gaps, decoder.stats.frames_missed) == (0, 0)


def test_gap_across_the_wrap_counts_missing_frames():
    frames: list[Frame] = [samples(65534, 0), samples(1, 12)]
    _, decoder = decode_all(b"".join(as_wire(frames)))
    assert (decoder.stats.sequence_gaps, decoder.stats.frames_missed) == (1, 2)


def test_forget_sequence_accepts_a_restarted_device():
    decoder = FrameDecoder()
    decoder.feed(encode_device_frame(samples(500, 0)))
    decoder.forget_sequence()
    assert len(decoder.feed(encode_device_frame(samples(0, 0)))) == 1
    assert (decoder.stats.frames_ok, decoder.stats.sequence_gaps) == (2, 0)
    decoder.feed(encode_device_frame(samples(7, 0)))  # without forgetting, a jump is a gap
    assert (decoder.stats.sequence_gaps, decoder.stats.frames_missed) == (1, 6)


@pytest.mark.parametrize(
    ("frame_type", "payload"),
    [
        (FrameType.SAMPLES, b"\x00\x00\x00\x00\x02\x01\x00\x02"),  # 1 value for 2 channels
        (FrameType.SAMPLES, b"\x00\x00\x00\x00\x00"),  # zero channels
        (FrameType.SAMPLES, b"\x00\x00\x00\x00\x01"),  # no samples
        (FrameType.SAMPLES, b"\x00\x00\x00\x00\x09" + b"\x00" * 18),  # nine columns
        (FrameType.SAMPLES, b"\x00"),
        (FrameType.MARKER, b"\x00\x00\x00\x00\x02\x07"),  # edge 7
        (FrameType.STATUS, b"\x00" * 4),
        (FrameType.ACK, b""),
        (FrameType.INFO, b"\x01" * 5),
    ],
)
def test_malformed_payload_with_good_crc_is_counted_not_yielded(frame_type: int, payload: bytes):
    out, decoder = decode_all(encode_frame(frame_type, 0, payload))
    assert out == []
    assert decoder.stats.malformed_frames == 1
    assert decoder.last_error is not None
    assert f"{frame_type:#04x}" in decoder.last_error


def test_unknown_type_is_counted_and_consumes_its_sequence_number():
    wire = encode_frame(0x42, 0, b"xy") + encode_device_frame(samples(1, 0))
    out, decoder = decode_all(wire)
    assert len(out) == 1
    assert decoder.stats.unknown_types == 1
    assert decoder.stats.sequence_gaps == 0


# --- property tests ---------------------------------------------------------------------------


@st.composite
def device_frames(draw: st.DrawFn, seq: int, sample_index: int) -> Frame:
    kind = draw(
        st.sampled_from(["samples", "samples", "samples", "marker", "status", "ack", "info"])
    )
    if kind == "samples":
        channels = draw(st.integers(1, 4))
        n = draw(st.integers(1, 40))
        raw = draw(st.binary(min_size=2 * n * channels, max_size=2 * n * channels))
        values = np.frombuffer(raw, dtype="<u2").reshape(n, channels) % 1024
        return Samples(seq, sample_index, values.astype(np.uint16))
    if kind == "marker":
        return Marker(seq, sample_index, 2, draw(st.integers(0, 1)))
    if kind == "status":
        return Status(seq, sample_index, draw(st.integers(0, 99)), seq, 0, draw(st.booleans()))
    if kind == "ack":
        return Ack(seq, draw(st.integers(0x81, 0x87)), draw(st.integers(0, 65535)), 0)
    name = draw(st.text(alphabet="abcdefgh0123456789", max_size=16))
    return Info(seq, 1, 1, 0, 0, 1, 16_000_000, 10, 5000, 1000, 3, 1, 500_000, 2, name)


Damage = tuple[str, int]  # ("intact" | "flip" | "truncate" | "drop", position)


@st.composite
def damaged_streams(draw: st.DrawFn) -> tuple[list[bytes], list[Damage], list[bytes]]:
    """(frames on the wire, damage per frame, garbage inserted after each frame)."""
    count = draw(st.integers(1, 30))
    seq = draw(st.integers(0, 65535))
    wire: list[bytes] = []
    index = 0
    for k in range(count):
        frame = draw(device_frames((seq + k) % 65536, index))
        index += frame.count if isinstance(frame, Samples) else 0
        wire.append(encode_device_frame(frame))
    damage = [
        (
            draw(st.sampled_from(["intact", "intact", "intact", "flip", "truncate", "drop"])),
            draw(st.integers(0, 8 * len(w) - 1)),
        )
        for w in wire
    ]
    garbage = [
        draw(st.one_of(st.just(b""), st.binary(max_size=12), st.just(b"\xa5\x5a"))) for _ in wire
    ]
    return wire, damage, garbage


def damaged_bytes(wire: list[bytes], damage: list[Damage], garbage: list[bytes]) -> bytes:
    """The stream as received. Built back to front so that a truncated frame never ends where
    the following bytes happen to repeat its lost tail (that would make it intact after all)."""
    rest = b""
    for frame, (kind, position), junk in zip(wire[::-1], damage[::-1], garbage[::-1], strict=True):
        after = junk + rest
        if kind == "flip":
            out = bytearray(frame)
            out[position // 8] ^= 1 << position % 8
            piece = bytes(out)
        elif kind == "truncate":
            keep = max(1, position // 8)
            while keep and after[:1] == frame[keep : keep + 1]:
                keep -= 1
            piece = frame[:keep]
        elif kind == "drop":
            piece = b""
        else:
            piece = frame
        rest = piece + after
    return rest


@settings(max_examples=300, deadline=None, derandomize=True)
@given(damaged_streams(), st.integers(1, 64))
def test_damaged_stream_yields_exactly_the_intact_frames_and_counts_every_gap(stream, chunk):
    wire, damage, garbage = stream
    data = damaged_bytes(wire, damage, garbage)
    out, decoder = decode_all(data, chunk=chunk)

    intact = [k for k, (kind, _) in enumerate(damage) if kind == "intact"]
    assert as_wire(out) == [wire[k] for k in intact]
    lost_between = (intact[-1] - intact[0] + 1 - len(intact)) if intact else 0
    assert decoder.stats.frames_missed == lost_between
    stats = decoder.stats
    assert stats.bytes_in == len(data)
    assert stats.bytes_discarded == len(data) - sum(len(wire[k]) for k in intact)
    assert decoder.pending_bytes == 0


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.binary(max_size=400), st.integers(1, 50))
def test_random_bytes_never_crash_and_are_accounted_for(data, chunk):
    out, decoder = decode_all(data, chunk=chunk)
    stats = decoder.stats
    assert stats.bytes_in == len(data)
    accepted = sum(len(encode_device_frame(f)) for f in out)
    assert stats.bytes_discarded == len(data) - accepted
