"""The decoder at its edges: exact counters, the largest payload, and candidates that would pass
their CRC by swallowing an intact frame in every position one can sit (found by mutation
testing: each case here failed a mutant of controller/meter/decoder.py that the rest survived)."""

from __future__ import annotations

import binascii

import pytest

from controller.meter.decoder import DecoderStats, FrameDecoder
from controller.meter.protocol import (
    MAX_PAYLOAD_BYTES,
    FrameType,
    Samples,
    encode_device_frame,
    encode_frame,
)
from tests.meter.test_decoder import as_wire, decode_all, samples

SYNC = b"\xa5\x5a"
BAD_LENGTH_SYNC = b"\xa5\x5a\xff\xff"  # a sync word whose length field no frame can have


def _forced(body_head: bytes, tail: bytes, target: bytes) -> bytes:
    """body_head + two bytes + tail whose CRC-16 is `target` (two bytes, little-endian): two
    free bytes anywhere in a message reach every CRC value exactly once."""
    want = int.from_bytes(target, "little")
    for free in range(1 << 16):
        body = body_head + free.to_bytes(2, "little") + tail
        if binascii.crc_hqx(body, 0xFFFF) == want:
            return body
    raise AssertionError("unreachable: the CRC is a bijection of the two free bytes")


def _header(length: int) -> bytes:
    """A SAMPLES header's fields after the sync word: length, type, seq 0."""
    return bytes([length & 0xFF, length >> 8, FrameType.SAMPLES, 0, 0])


def test_a_fresh_decoder_has_counted_nothing():
    decoder = FrameDecoder()
    assert decoder.stats == DecoderStats()
    assert decoder.last_error is None
    assert decoder.pending_bytes == 0


def test_the_largest_payload_is_a_frame_and_one_byte_more_is_not():
    largest = encode_frame(0x42, 0, bytes(MAX_PAYLOAD_BYTES))
    out, decoder = decode_all(largest)
    assert out == []
    assert (decoder.stats.frames_ok, decoder.stats.unknown_types) == (1, 1)
    assert decoder.stats.length_errors == 0
    too_long = SYNC + _header(MAX_PAYLOAD_BYTES + 1)
    (good,) = as_wire([samples(1, 0)])
    out, decoder = decode_all(too_long + good)
    assert as_wire(out) == [good]
    assert decoder.stats.length_errors == 1


def test_a_flipped_payload_bit_is_one_crc_failure_and_nothing_else():
    a, b = as_wire([samples(0, 0), samples(1, 4)])
    damaged = bytearray(a)
    damaged[12] ^= 0x10
    out, decoder = decode_all(bytes(damaged) + b)
    assert as_wire(out) == [b]
    stats = decoder.stats
    assert (stats.crc_failures, stats.length_errors, stats.truncated_frames) == (1, 0, 0)
    assert (stats.frames_ok, stats.sequence_gaps, stats.frames_missed) == (1, 0, 0)


def _twice(damage: str) -> tuple[bytes, bytes]:
    """Two of one kind of damage, each before an intact frame; (stream, intact frames)."""
    good = as_wire([samples(k, 4 * k) for k in range(1, 5)])
    bad = {
        "crc": bytes(as_wire([samples(9, 0)])[0][:-1]) + b"\x00",
        "length": SYNC + _header(MAX_PAYLOAD_BYTES + 7),
        "malformed": encode_frame(FrameType.MARKER, 0, b"\x00\x00\x00\x00\x02\x07"),
        "unknown": encode_frame(0x42, 0, b"xy"),
    }[damage]
    if damage in ("malformed", "unknown"):  # good CRCs: they take sequence numbers of their own
        bad1, bad2 = (
            encode_frame(bad[4], 1, bad[7:-2]),
            encode_frame(bad[4], 3, bad[7:-2]),
        )
        good = as_wire([samples(0, 0), samples(2, 4), samples(4, 8)])
        return good[0] + bad1 + good[1] + bad2 + good[2], b"".join(good)
    return bad + good[0] + good[1] + bad + good[2] + good[3], b"".join(good)


@pytest.mark.parametrize(
    ("damage", "counter"),
    [
        ("crc", "crc_failures"),
        ("length", "length_errors"),
        ("malformed", "malformed_frames"),
        ("unknown", "unknown_types"),
    ],
)
def test_each_rejection_is_counted_once_and_the_frames_after_it_come_out(damage, counter):
    stream, intact = _twice(damage)
    out, decoder = decode_all(stream)
    assert b"".join(as_wire(out)) == intact
    assert getattr(decoder.stats, counter) == 2
    assert decoder.stats.sequence_gaps == 0
    if damage in ("malformed", "unknown"):
        assert decoder.last_error is not None
        assert decoder.last_error.startswith("frame type 0x")
        assert ("unknown type" in decoder.last_error) == (damage == "unknown")


def test_two_truncated_frames_and_two_gaps_count_two_each():
    a, b, c, d, e = as_wire([samples(k, 4 * k) for k in range(5)])
    out, decoder = decode_all(a + b[:10] + c + d[:10] + e, chunk=3)
    assert as_wire(out) == [a, c, e]
    assert (decoder.stats.sequence_gaps, decoder.stats.frames_missed) == (2, 2)
    tail_cut = FrameDecoder()
    tail_cut.feed(a[:10])
    tail_cut.flush()
    tail_cut.feed(b[:11])
    tail_cut.flush()
    assert tail_cut.stats.truncated_frames == 2


def test_a_sync_word_inside_a_frame_that_starts_a_damaged_frame_is_no_reason_to_reject_it():
    # Channel 1, values whose bytes read a5 5a 02 00 ...: a complete frame candidate of two
    # payload bytes inside this one, with a wrong CRC.
    values = b"\xa5\x5a\x02\x00\x02\x00\x00\x01\x02\x00\x00\x00"
    host = encode_frame(FrameType.SAMPLES, 0, b"\x00\x00\x00\x00\x01" + values)
    (behind,) = as_wire([samples(1, 6)])
    out, decoder = decode_all(host + behind)
    assert as_wire(out) == [host, behind]
    assert decoder.stats.crc_failures == 0


def test_a_payload_holding_the_sync_word_then_a_frame_right_behind_it():
    """Sync-like bytes inside a frame, and an intact frame starting where it ends, are no
    reason to reject it: only intact frames that start inside a candidate are."""
    values = b"\xa5\x5a" * 4  # the sample values 0x5aa5 ... are data here
    inner_sync = encode_frame(FrameType.SAMPLES, 0, b"\x00\x00\x00\x00\x02" + values)
    (behind,) = as_wire([samples(1, 2)])
    for chunk in (0, 1, 7):
        out, decoder = decode_all(inner_sync + behind, chunk=chunk)
        assert as_wire(out) == [inner_sync, behind], chunk
        assert decoder.stats.crc_failures == 0


@pytest.mark.parametrize("chunk", [0, 1, 4])
def test_the_intact_frame_found_among_sync_like_bytes_inside_a_candidate(chunk):
    """The inner intact frame sits between two sync words that start no frame."""
    (inner,) = as_wire([samples(1, 4)])
    before, after = BAD_LENGTH_SYNC + b"\x07", BAD_LENGTH_SYNC
    body = _header(len(before) + len(inner) + len(after)) + before + inner + after
    candidate = SYNC + body + binascii.crc_hqx(body, 0xFFFF).to_bytes(2, "little")
    out, decoder = decode_all(candidate + candidate, chunk=chunk)
    assert as_wire(out) == [inner, inner]
    assert decoder.stats.crc_failures == 2  # each rejected candidate counts


@pytest.mark.parametrize("chunk", [0, 1, 3])
def test_an_intact_frame_that_starts_inside_a_candidate_and_ends_after_it(chunk):
    """The candidate's CRC is two bytes in the middle of the intact frame behind its start:
    fed in pieces, the decoder must wait for the rest of that frame before judging it."""
    (inner,) = as_wire([samples(1, 4, n=8)])
    cut = 12  # the candidate ends 12 bytes into the inner frame: its CRC is inner[10:12]
    body = _forced(_header(2 + cut - 2), inner[: cut - 2], inner[cut - 2 : cut])
    stream = SYNC + body + inner[cut - 2 :]
    out, decoder = decode_all(stream, chunk=chunk)
    assert as_wire(out) == [inner]
    assert decoder.stats.crc_failures == 1


@pytest.mark.parametrize(("chunk", "before"), [(0, b"\x01"), (1, b"\x01"), (0, BAD_LENGTH_SYNC)])
def test_an_intact_frame_whose_sync_word_is_the_candidates_crc(chunk, before):
    """Also after a sync word inside the candidate that starts no frame."""
    (inner,) = as_wire([samples(1, 4)])
    body = _forced(_header(len(before) + 2), before, SYNC)
    stream = SYNC + body + inner  # inner's sync word is the candidate's CRC
    out, decoder = decode_all(stream, chunk=chunk)
    assert as_wire(out) == [inner]
    assert decoder.stats.crc_failures == 1
    assert isinstance(out[0], Samples)
    assert len(encode_device_frame(out[0])) == len(inner)
