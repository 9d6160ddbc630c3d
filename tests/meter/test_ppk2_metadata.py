"""The PPK2 metadata reply: strict parsing (never a default resistor), formatting, finding it."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from controller.errors import MeterError, MeterFrameError
from controller.meter.ppk2 import (
    EXAMPLE_METADATA,
    Ppk2Device,
    Ppk2MetadataError,
    Ppk2Mode,
    format_metadata,
    parse_metadata,
    scan_metadata_reply,
)
from controller.meter.ppk2.metadata import KEY_ORDER

# A reply as the firmware prints it: fixed decimals, this key order, END last.
DEVICE_REPLY = b"""Calibrated: 1
R0: 1004.1200
R1: 101.3300
R2: 10.2100
R3: 0.9580
R4: 0.0550
GS0: 0.0000
GS1: 110.2000
GS2: 17.9000
GS3: 2.4000
GS4: 0.0700
GI0: 1.0000
GI1: 0.9700
GI2: 0.9600
GI3: 0.9500
GI4: 0.9600
O0: 111.5000
O1: 75.0000
O2: 64.0000
O3: 50.0000
O4: 87.0000
VDD: 3300
HW: 9173
mode: 2
S0: 0.000000050
S1: 0.000000600
S2: 0.000005300
S3: 0.000062000
S4: 0.002900000
I0: -0.000000100
I1: -0.000001400
I2: 0.000036000
I3: -0.000370000
I4: -0.009300000
UG0: 1.00
UG1: 1.00
UG2: 1.00
UG3: 1.00
UG4: 1.00
IA: 56
END
"""


def replace_line(reply: bytes, key: str, line: bytes | None) -> bytes:
    """The reply with KEY's line replaced by `line`, or removed for None."""
    out = []
    for raw in reply.split(b"\n"):
        if raw.startswith(key.encode() + b": "):
            if line is not None:
                out.append(line)
        else:
            out.append(raw)
    return b"\n".join(out)


def test_a_device_reply_parses_with_units():
    meta = parse_metadata(DEVICE_REPLY)
    assert meta.calibrated is True
    assert meta.vdd_mv == 3300 and meta.hardware_id == 9173 and meta.ia == 56
    assert meta.mode is Ppk2Mode.SOURCE
    r1 = meta.ranges[1]
    assert r1.resistor_ohm == 101.33
    assert r1.gain_quadratic_per_a == 110.2
    assert r1.gain_linear == 0.97
    assert r1.offset_counts == 75.0
    assert r1.supply_slope_a_per_v == 0.0000006
    assert r1.offset_a == -0.0000014
    assert r1.user_gain == 1.0
    assert [r.resistor_ohm for r in meta.ranges] == [1004.12, 101.33, 10.21, 0.958, 0.055]
    assert meta.extra == ()


def test_format_then_parse_is_identity_and_keeps_the_firmware_order():
    reply = format_metadata(EXAMPLE_METADATA)
    assert parse_metadata(reply) == EXAMPLE_METADATA
    keys = [line.split(b": ")[0].decode() for line in reply.splitlines()[:-1]]
    assert tuple(keys) == KEY_ORDER
    assert reply.endswith(b"\nEND\n")
    assert b"e-" not in reply  # positional decimals, as the firmware prints them


def test_crlf_line_ends_and_a_missing_final_newline_are_accepted():
    assert parse_metadata(DEVICE_REPLY.replace(b"\n", b"\r\n")) == parse_metadata(DEVICE_REPLY)
    assert parse_metadata(DEVICE_REPLY.rstrip(b"\n")) == parse_metadata(DEVICE_REPLY)
    assert parse_metadata(DEVICE_REPLY.decode()) == parse_metadata(DEVICE_REPLY)


def test_unknown_keys_are_kept_not_refused():
    reply = DEVICE_REPLY.replace(b"END\n", b"FW: 4.0.0\nEND\n")
    meta = parse_metadata(reply)
    assert meta.extra == (("FW", "4.0.0"),)
    assert parse_metadata(format_metadata(meta)) == meta


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (DEVICE_REPLY[: DEVICE_REPLY.index(b"GI2")], "last line is not END"),
        (DEVICE_REPLY[DEVICE_REPLY.index(b"GI2") :], "lacks key Calibrated"),
        (replace_line(DEVICE_REPLY, "R3", None), "lacks key R3"),
        (replace_line(DEVICE_REPLY, "R2", b"R2: 0.0000"), "R2 must be a positive"),
        (replace_line(DEVICE_REPLY, "GS2", b"GS2: -nan"), "GS2 is not a finite number: '-nan'"),
        (replace_line(DEVICE_REPLY, "O1", b"O1: inf"), "O1 is not a finite number"),
        (replace_line(DEVICE_REPLY, "UG4", b"UG4: 1_0"), "UG4 is not a finite number"),
        (replace_line(DEVICE_REPLY, "VDD", b"VDD: 3.3"), "VDD is not an integer"),
        (replace_line(DEVICE_REPLY, "mode", b"mode: 3"), "mode must be 1 or 2"),
        (replace_line(DEVICE_REPLY, "Calibrated", b"Calibrated: 2"), "Calibrated must be"),
        (replace_line(DEVICE_REPLY, "HW", b"HW 9173"), "line 23 is not 'KEY: VALUE'"),
        (DEVICE_REPLY.replace(b"END\n", b"R0: 1.0\nEND\n"), "R0 appears twice"),
        (DEVICE_REPLY + DEVICE_REPLY, "line 41 is not 'KEY: VALUE': 'END'"),
        (DEVICE_REPLY.replace(b"HW: 9173", b"HW: 91\xf373"), "not ASCII at byte"),
        (b"", "last line is not END"),
        (b"END\n", "lacks key Calibrated"),
    ],
)
def test_a_broken_reply_is_refused_in_one_line_naming_the_fault(reply, message):
    with pytest.raises(Ppk2MetadataError, match=message) as raised:
        parse_metadata(reply)
    assert "\n" not in str(raised.value)


def test_the_error_is_a_meter_frame_error():
    assert issubclass(Ppk2MetadataError, MeterFrameError)
    assert issubclass(Ppk2MetadataError, MeterError)


@given(st.integers(min_value=1, max_value=len(DEVICE_REPLY) - 2))
def test_either_half_of_a_split_reply_is_refused(cut):
    # ppk2-api parses the half that holds END and fills the rest from its defaults.
    for half in (DEVICE_REPLY[:cut], DEVICE_REPLY[cut:]):
        with pytest.raises(Ppk2MetadataError):
            parse_metadata(half)


@given(st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_arbitrary_bytes_parse_or_raise_only_the_documented_error(data):
    with contextlib.suppress(Ppk2MetadataError):
        parse_metadata(data)


@given(
    st.lists(st.sampled_from(KEY_ORDER), max_size=3),
    st.integers(min_value=0, max_value=len(KEY_ORDER)),
)
def test_any_key_missing_or_repeated_is_refused(missing, repeat_at):
    lines = DEVICE_REPLY.split(b"\n")
    kept = [raw for raw in lines if raw.split(b": ")[0].decode() not in missing]
    if not missing:
        kept.insert(repeat_at, lines[repeat_at % len(KEY_ORDER)])
    with pytest.raises(Ppk2MetadataError):
        parse_metadata(b"\n".join(kept))


def stream_bytes(n_samples: int) -> bytes:
    device = Ppk2Device()
    device.receive(b"\x06")
    device.samples(n_samples, 1234.5, 0x5A)
    return b"".join(device.data_to_send())


def test_scan_sets_stale_stream_bytes_apart_from_the_reply():
    stale = stream_bytes(3000)[5:]  # a killed session's leftovers, cut mid-word
    after = stream_bytes(10)
    scan = scan_metadata_reply(stale + DEVICE_REPLY + after)
    assert scan.stale == stale
    assert scan.reply == DEVICE_REPLY
    assert scan.rest == after
    assert parse_metadata(scan.reply) == parse_metadata(DEVICE_REPLY)


def test_scan_of_an_incomplete_reply_keeps_what_may_still_become_one():
    stale = stream_bytes(100)
    scan = scan_metadata_reply(stale + b"Calibr")
    # Without the whole first key, only bytes that could start it are kept.
    assert scan.reply is None and scan.stale + scan.rest == stale + b"Calibr"
    assert len(scan.rest) == len(b"Calibrated: ") - 1
    scan = scan_metadata_reply(stale + DEVICE_REPLY[:300])
    assert scan.reply is None and scan.stale == stale and scan.rest == DEVICE_REPLY[:300]
    # END read, its line end not yet: a newline left behind would reach the sample stream.
    for cut in (DEVICE_REPLY[:-1], DEVICE_REPLY.replace(b"\n", b"\r\n")[:-1]):
        scan = scan_metadata_reply(stale + cut)
        assert scan.reply is None and scan.stale == stale and scan.rest == cut


def test_a_line_end_waited_for_long_enough_is_not_required():
    for cut in (DEVICE_REPLY[:-1], DEVICE_REPLY.replace(b"\n", b"\r\n")[:-1]):
        waiting = scan_metadata_reply(cut)
        assert waiting.reply is None and waiting.awaits_line_end
        scan = scan_metadata_reply(cut, line_end_due=True)
        assert scan.reply == cut and scan.rest == b"" and not scan.awaits_line_end


def test_scan_ends_a_reply_whose_end_is_followed_by_no_newline_before_what_follows():
    after = stream_bytes(3)
    scan = scan_metadata_reply(DEVICE_REPLY[:-1] + after)
    assert scan.reply == DEVICE_REPLY[:-1] and scan.rest == after


WHOLE_SCANNED = stream_bytes(200)[3:] + DEVICE_REPLY + stream_bytes(5)


# An ordinary (not derandomised) run found a read ending between END and its newline.
@example(cuts=[1307])
@given(st.lists(st.integers(min_value=0, max_value=len(WHOLE_SCANNED)), max_size=8))
def test_scanning_read_by_read_finds_the_same_reply(cuts):
    whole = WHOLE_SCANNED
    assert whole[1304:1308] == b"END\n"  # the example's cut: after END, before its newline
    cuts = sorted(cuts)
    buffer, stale, reply = b"", b"", None
    for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True):
        buffer += whole[a:b]
        scan = scan_metadata_reply(buffer)
        stale += scan.stale
        if scan.reply is not None:
            reply = scan.reply
            buffer = scan.rest
            break
        buffer = scan.rest
    assert reply is not None
    assert stale == whole[: whole.index(b"Calibrated")]
    assert reply == DEVICE_REPLY


def test_a_reply_with_stream_bytes_inside_is_found_then_refused():
    torn = DEVICE_REPLY[:200] + stream_bytes(4) + DEVICE_REPLY[200:]
    scan = scan_metadata_reply(torn)
    assert scan.reply == torn
    with pytest.raises(Ppk2MetadataError):
        parse_metadata(scan.reply)


def test_metadata_with_a_range_count_other_than_five_is_our_mistake():
    with pytest.raises(ValueError, match="5 ranges"):
        dataclasses.replace(EXAMPLE_METADATA, ranges=EXAMPLE_METADATA.ranges[:4])
