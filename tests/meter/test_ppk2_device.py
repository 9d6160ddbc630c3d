"""The sans-IO PPK2 model: commands, the sample words it makes, auto-ranging, injected faults."""

from __future__ import annotations

import time

import numpy as np
import pytest
import serial
from hypothesis import given
from hypothesis import strategies as st

from controller.meter.ppk2 import (
    EXAMPLE_METADATA,
    RANGE_CEILINGS_UA,
    Ppk2CommandError,
    Ppk2Decoder,
    Ppk2Device,
    Ppk2Error,
    Ppk2Faults,
    Ppk2Mode,
    adc_to_ua,
    parse_metadata,
    scan_metadata_reply,
    ua_to_codes,
)
from controller.meter.ppk2.emulator import Ppk2Emulator, constant_source

START = b"\x06"
STOP = b"\x07"
SOURCE_MODE = b"\x11\x02"
AMPERE_MODE = b"\x11\x01"
DUT_ON = b"\x0c\x01"
VDD_3300 = b"\x0d\x0c\xe4"  # what ppk2-api's set_source_voltage(3300) writes


def started(faults: Ppk2Faults | None = None, *, mode: bytes = SOURCE_MODE) -> Ppk2Device:
    device = Ppk2Device(faults=faults)
    device.receive(mode + VDD_3300 + DUT_ON + START)
    return device


def words(data: bytes) -> np.ndarray:
    assert len(data) % 4 == 0
    return np.frombuffer(data, dtype="<u4")


def out(device: Ppk2Device) -> bytes:
    return b"".join(device.data_to_send())


def test_the_commands_ppk2_api_sends_set_the_state_they_name():
    device = Ppk2Device()
    assert not device.running and device.mode is EXAMPLE_METADATA.mode
    device.receive(AMPERE_MODE + VDD_3300 + DUT_ON)
    assert device.mode is Ppk2Mode.AMPERE and device.vdd_mv == 3300 and device.dut_power
    device.receive(START)
    assert device.running and device.starts == 1
    device.receive(STOP + b"\x0c\x00")
    assert not device.running and not device.dut_power
    assert [c.name for c in device.commands] == [
        "set_power_mode",
        "regulator_set",
        "device_running_set",
        "average_start",
        "average_stop",
        "device_running_set",
    ]
    assert device.commands[1].args == b"\x0c\xe4"


def test_the_metadata_reply_reports_the_voltage_and_mode_as_set():
    device = Ppk2Device()
    device.receive(AMPERE_MODE + b"\x0d\x07\xd0" + b"\x19")  # 2000 mV
    meta = parse_metadata(out(device))
    assert meta.vdd_mv == 2000 and meta.mode is Ppk2Mode.AMPERE
    assert meta.ranges == EXAMPLE_METADATA.ranges


@given(st.integers(min_value=1, max_value=7))
def test_commands_split_across_reads_are_obeyed_once_whole(cut):
    stream = SOURCE_MODE + VDD_3300 + DUT_ON + START
    device = Ppk2Device()
    device.receive(stream[:cut])
    device.receive(stream[cut:])
    assert device.running and device.vdd_mv == 3300 and len(device.commands) == 4


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (b"\x42", "unknown command byte 0x42"),
        (b"\x11\x03", "power mode must be 1 or 2, got 3"),
        (b"\x0d\x03\x1f", "source voltage must be 800-5000 mV, got 799"),
        (b"\x0d\x13\x89", "got 5001"),
        (b"\x0c\x02", "DUT power must be 0 or 1, got 2"),
    ],
)
def test_a_command_the_model_does_not_know_is_refused(command, message):
    device = Ppk2Device()
    with pytest.raises(Ppk2CommandError, match=message):
        device.receive(command + START)
    assert not device.running  # the rest of that input was discarded
    device.receive(START)
    assert device.running


def test_sample_words_carry_range_code_counter_and_logic():
    device = started()
    logic = np.arange(130, dtype=np.uint8)
    assert device.samples(130, 250.0, logic) == 130
    w = words(out(device))
    assert (w >> 24).tolist() == logic.tolist()
    assert ((w >> 18) & 63).tolist() == [i % 64 for i in range(130)]
    assert ((w >> 14) & 7).tolist() == [0] * 130
    assert not (w & (1 << 17)).any()
    _, code = ua_to_codes(EXAMPLE_METADATA, 3300, 250.0)
    assert (w & 0x3FFF).tolist() == [int(code)] * 130


def test_a_stopped_device_sends_nothing_and_its_counter_stands():
    device = Ppk2Device()
    assert device.samples(100, 10.0) == 0
    assert out(device) == b"" and device.sample_index == 0
    device.receive(START)
    device.samples(3, 10.0)
    device.receive(STOP)
    device.samples(5, 10.0)
    device.receive(START)
    device.samples(2, 10.0)
    assert ((words(out(device)) >> 18) & 63).tolist() == [0, 1, 2, 3, 4]


def test_an_unpowered_dut_in_source_mode_draws_nothing():
    device = Ppk2Device()
    device.receive(SOURCE_MODE + VDD_3300 + START)
    device.samples(4, 40_000.0)
    w = words(out(device))
    current = adc_to_ua(EXAMPLE_METADATA, 3300, (w >> 14) & 7, w & 0x3FFF)
    assert np.abs(current).max() < 1.0
    ampere = started(mode=AMPERE_MODE)
    ampere.receive(b"\x0c\x00")
    ampere.samples(4, 40_000.0)
    w = words(out(ampere))
    assert adc_to_ua(EXAMPLE_METADATA, 3300, (w >> 14) & 7, w & 0x3FFF) == pytest.approx(
        40_000.0, rel=1e-3
    )


def test_auto_ranging_follows_the_documented_ceilings():
    below = [c * 0.999 for c in RANGE_CEILINGS_UA]
    at = list(RANGE_CEILINGS_UA)
    r, _ = ua_to_codes(EXAMPLE_METADATA, 3300, [0.0, *below, *at, 900_000.0])
    assert r.tolist() == [0, 0, 1, 2, 3, 1, 2, 3, 4, 4]


def test_out_of_range_currents_saturate_the_adc():
    r, code = ua_to_codes(EXAMPLE_METADATA, 3300, [-50.0, 1e8, float("nan")])
    assert r.tolist() == [0, 4, 4]
    assert code.tolist() == [0, 16383, 0]


@given(st.floats(min_value=0.0, max_value=1e6))
def test_the_code_is_the_one_whose_current_is_nearest(current):
    r, code = ua_to_codes(EXAMPLE_METADATA, 3300, current)
    neighbours = np.clip(int(code) + np.array([-1, 0, 1]), 0, 16383)
    values = adc_to_ua(EXAMPLE_METADATA, 3300, np.full(3, int(r)), neighbours)
    errors = np.abs(values - current)
    assert errors[1] <= errors.min() * (1 + 1e-9) + 1e-9


def test_dropped_samples_advance_the_counter_unsent():
    device = started(Ppk2Faults(drop_samples={10: 5, 70: 1}))
    device.samples(100, 1.0)
    c = ((words(out(device)) >> 18) & 63).tolist()
    expected = [i % 64 for i in range(100) if not (10 <= i < 15 or i == 70)]
    assert c == expected


def test_lose_skips_instants_while_started():
    device = started()
    device.samples(2, 1.0)
    device.lose(7)
    device.samples(1, 1.0)
    assert ((words(out(device)) >> 18) & 63).tolist() == [0, 1, 9]


@given(
    st.dictionaries(st.integers(0, 399), st.binary(min_size=1, max_size=3), max_size=3),
    st.dictionaries(st.integers(0, 399), st.integers(1, 3), max_size=3),
    st.lists(st.integers(1, 30), min_size=1, max_size=6),
)
def test_slips_insert_and_delete_exactly_the_bytes_named_at_any_chunking(inserts, deletes, chunks):
    clean = started()
    clean.samples(sum(chunks), 777.0, 3)
    nominal = bytearray(out(clean))
    faulty = started(Ppk2Faults(insert_bytes=inserts, delete_bytes=deletes))
    for n in chunks:
        faulty.samples(n, 777.0, 3)
    expected = bytearray()
    deleting = 0
    for offset, byte in enumerate(nominal):
        expected += inserts.get(offset, b"")
        deleting = max(deleting, deletes.get(offset, 0))
        if deleting:
            deleting -= 1
        else:
            expected.append(byte)
    assert out(faulty) == bytes(expected)


def test_a_split_metadata_reply_comes_in_two_pieces_with_samples_after_them():
    device = started(Ppk2Faults(split_metadata_at=100))
    device.receive(b"\x19")
    device.samples(3, 5.0)
    pieces = device.data_to_send()
    assert len(pieces) == 2 and len(pieces[0]) == 100
    whole = pieces[0] + pieces[1]
    reply = whole[: whole.index(b"END\n") + 4]
    assert parse_metadata(reply).vdd_mv == 3300
    assert len(whole) - len(reply) == 12
    assert device.data_to_send() == []


# The emulator: the model on a real pty, read by a plain pyserial client.


def read_for(port: serial.Serial, seconds: float) -> bytes:
    data = bytearray()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        data += port.read(port.in_waiting or 1)
    return bytes(data)


def test_the_emulator_answers_a_serial_client_on_its_pty():
    with Ppk2Emulator(constant_source(2_500.0, logic=1)) as emulator:
        with serial.Serial(emulator.port, timeout=0.05) as port:
            port.write(b"\x19")
            scan = scan_metadata_reply(read_for(port, 0.3))
            assert scan.stale == b"" and scan.reply is not None
            meta = parse_metadata(scan.reply)
            port.write(SOURCE_MODE + VDD_3300 + DUT_ON + START)
            raw = read_for(port, 0.3)
            port.write(STOP)
        assert emulator.overflow_samples == 0
    block = Ppk2Decoder(meta, 3300).feed(raw)
    assert len(block) > 5_000  # 0.3 s at 100 kS/s, less start-up on a loaded machine
    assert block.lost_samples == 0 and block.resyncs == 0 and block.skipped_bytes == 0
    assert block.current_ua == pytest.approx(2_500.0, rel=1e-3)
    assert set(block.logic.tolist()) == {1}


def test_a_command_the_model_refuses_ends_the_emulator_loudly():
    emulator = Ppk2Emulator(constant_source(1.0))
    with (
        pytest.raises(Ppk2Error, match="unknown command byte 0x42"),
        emulator,
        serial.Serial(emulator.port, timeout=0.05) as port,
    ):
        port.write(b"\x42")
        deadline = time.monotonic() + 5
        while emulator.failure is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert isinstance(emulator.failure, Ppk2CommandError)


def test_an_unread_port_overflows_into_counted_losses():
    emulator = Ppk2Emulator(constant_source(10.0), backlog_limit_bytes=4096)
    decoder = Ppk2Decoder(EXAMPLE_METADATA, 3300)
    lost_samples = 0
    with emulator, serial.Serial(emulator.port, timeout=0.05) as port:
        port.write(START)
        time.sleep(0.5)  # the pty fills, then the backlog, then instants pass unsent
        # The gap shows in the stream once what was queued before it has been read: on a busy
        # machine the emulator reaches it later, so read until it does (a hang guard, no rate).
        give_up = time.monotonic() + 60
        while lost_samples == 0 and time.monotonic() < give_up:
            lost_samples += decoder.feed(read_for(port, 0.2)).lost_samples
        port.write(STOP)
    assert emulator.overflow_samples > 0
    assert lost_samples > 0
