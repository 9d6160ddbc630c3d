"""The wire protocol's payload codecs at their edges: every refusal is one line naming the frame
type, the size or value it got and what it expected (the decoder passes it on as last_error);
channel masks; the largest payload; board names that are not ASCII."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from controller.meter.protocol import (
    MAX_PAYLOAD_BYTES,
    Ack,
    Info,
    Marker,
    PayloadError,
    Samples,
    Status,
    channels_of_mask,
    encode_frame,
    parse_samples,
)

INFO_FIELDS = (1, 1, 2, 3, 1, 16_000_000, 10, 5000, 1000, 0x03, 1, 500_000, 2)


def test_channel_masks_name_the_analog_inputs_in_order():
    assert channels_of_mask(0b1010_0101) == (0, 2, 5, 7)
    assert channels_of_mask(0) == ()
    assert channels_of_mask(0x100) == ()  # eight inputs: bit 8 is none of them
    assert channels_of_mask(0x1FF) == tuple(range(8))


def test_a_frame_without_a_payload_is_its_nine_bytes_of_overhead():
    assert encode_frame(0x86, 7) == bytes.fromhex("a55a0000860700") + encode_frame(0x86, 7)[-2:]
    assert len(encode_frame(0x86, 7)) == 9


def test_a_frame_carries_the_largest_payload_and_refuses_one_byte_more():
    assert len(encode_frame(0x02, 0, bytes(MAX_PAYLOAD_BYTES))) == MAX_PAYLOAD_BYTES + 9
    with pytest.raises(ValueError, match=r"^payload of 1025 bytes exceeds 1024$"):
        encode_frame(0x02, 0, bytes(MAX_PAYLOAD_BYTES + 1))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x00\x00\x00", "SAMPLES payload of 3 bytes is shorter than its header"),
        (b"\x00\x00\x00\x00\x01", "SAMPLES payload: 0 value bytes for 1 columns"),
        (b"\x00\x00\x00\x00\x02\x01\x00", "SAMPLES payload: 2 value bytes for 2 columns"),
        # Protocol 2: up to 8 columns (analog inputs, two per INA219); 9 is one too many.
        (b"\x00\x00\x00\x00\x09" + bytes(18), "SAMPLES payload: 18 value bytes for 9 columns"),
    ],
)
def test_bad_samples_payloads_are_named(payload: bytes, message: str):
    with pytest.raises(PayloadError) as caught:
        Samples.parse(3, payload)
    assert str(caught.value) == message


def test_samples_parse_whole_payloads_and_slices_of_a_buffer_alike():
    payload = struct.pack("<IB", 70_000, 2) + np.arange(6, dtype="<u2").tobytes()
    whole = Samples.parse(9, payload)
    assert (whole.seq, whole.first_sample_index, whole.count, whole.channel_count) == (
        9,
        70_000,
        3,
        2,
    )
    assert whole.values.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert whole.payload() == payload
    sliced = parse_samples(9, b"junk" + payload + b"more", 4, len(payload))
    assert sliced.values.tolist() == whole.values.tolist()
    assert sliced.first_sample_index == 70_000


@pytest.mark.parametrize(
    ("parse", "payload", "message"),
    [
        (Ack.parse, b"\x82\x00\x00", "ACK payload of 3 bytes, expected 4"),
        (Marker.parse, bytes(7), "MARKER payload of 7 bytes, expected 6"),
        (Marker.parse, b"\x00\x00\x00\x00\x02\x07", "MARKER edge 7, expected 0 or 1"),
        (Status.parse, bytes(16), "STATUS payload of 16 bytes, expected 15"),
        (Status.parse, bytes(14) + b"\x02", "STATUS running flag 2, expected 0 or 1"),
        (Info.parse, bytes(5), "INFO payload of 5 bytes, expected 23..39"),
        (Info.parse, bytes(40), "INFO payload of 40 bytes, expected 23..39"),
    ],
)
def test_payloads_of_the_wrong_size_or_value_are_named(parse, payload: bytes, message: str):
    with pytest.raises(PayloadError) as caught:
        parse(1, payload)
    assert str(caught.value) == message


def test_info_accepts_a_board_name_of_16_bytes_and_escapes_what_is_not_printable_ascii():
    head = Info(0, *INFO_FIELDS, "").payload()
    assert len(head) == 23
    longest = Info.parse(1, head + b"mega2560-rev3-xy")
    assert longest.board == "mega2560-rev3-xy"
    assert Info.parse(1, head + "méga".encode()).board == "m\\xc3\\xa9ga"
    assert Info(0, *INFO_FIELDS, "a" * 20).payload() == head + b"a" * 16
