"""ppk2-api 0.9.2 as the oracle: it drives our emulator through a real pty as it would a PPK2,
and its conversion of the same bytes checks our decoder's. Required in CI."""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

try:
    from ppk2_api.ppk2_api import PPK2_API
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip(
        "ppk2-api is not installed: the oracle tests need it (in CI they must run)",
        allow_module_level=True,
    )

from controller.meter.ppk2 import (
    EXAMPLE_METADATA,
    SAMPLE_RATE_HZ,
    Ppk2Decoder,
    Ppk2Device,
    Ppk2Faults,
    Ppk2Metadata,
    Ppk2MetadataError,
    RangeCalibration,
    adc_to_ua,
    format_metadata,
    parse_metadata,
    ua_to_codes,
)
from controller.meter.ppk2.decoder import CONFIRM_WORDS
from controller.meter.ppk2.emulator import Ppk2Emulator

VDD = 3300
SEGMENT = 500  # samples (5 ms) per level: every range, entered from every other
LEVELS_UA = np.array([40.0, 1_500.0, 20_000.0, 650_000.0, 5.0, 200_000.0, 3_000.0, 700_000.0])


def instants(t_s: np.ndarray) -> np.ndarray:
    return np.rint(t_s * SAMPLE_RATE_HZ).astype(np.int64)


def modelled(t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Current steps through the levels; D0 (the trial marker) is high every other step."""
    segment = instants(t_s) // SEGMENT
    return LEVELS_UA[segment % LEVELS_UA.size], (segment % 2).astype(np.uint8)


def timestamped(t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same currents; the logic byte carries each instant's number mod 256."""
    current, _ = modelled(t_s)
    return current, (instants(t_s) % 256).astype(np.uint8)


def read_with_ppk2_api(api: PPK2_API, wanted: int) -> tuple[list[float], list[int], bytes]:
    """ppk2-api's own loop (get_data, get_samples) until `wanted` samples; the bytes too."""
    samples: list[float] = []
    bits: list[int] = []
    raw = bytearray()
    waiting = b""
    deadline = time.monotonic() + 30
    while len(samples) < wanted and time.monotonic() < deadline:
        waiting += api.get_data()
        # get_samples invents a sample from fewer than 4 new bytes (test below): hand it more.
        if len(waiting) >= 4:
            raw += waiting
            s, b = api.get_samples(waiting)
            samples += s
            bits += b
            waiting = b""
        time.sleep(0.01)
    assert len(samples) >= wanted, "the emulator's stream did not arrive"
    return samples, bits, bytes(raw)


def open_like_a_user(port: str) -> PPK2_API:
    api = PPK2_API(port)
    assert api.get_modifiers() is True
    api.use_source_meter()
    api.set_source_voltage(VDD)
    api.toggle_DUT_power("ON")
    api.start_measuring()
    return api


def filter_windows(meas_range: np.ndarray) -> np.ndarray:
    """Samples the spike filter replaces: a range change and the two after it."""
    window = np.zeros(meas_range.size, dtype=bool)
    for at in np.flatnonzero(meas_range[1:] != meas_range[:-1]) + 1:
        window[at : at + 3] = True
    return window


def half_step_ua(current_ua: np.ndarray) -> np.ndarray:
    r, code = ua_to_codes(EXAMPLE_METADATA, VDD, current_ua)
    up = adc_to_ua(EXAMPLE_METADATA, VDD, r, np.minimum(code.astype(np.int64) + 1, 16383))
    down = adc_to_ua(EXAMPLE_METADATA, VDD, r, np.maximum(code.astype(np.int64) - 1, 0))
    return np.abs(up - down) / 4 * (1 + 1e-9)


def test_ppk2_api_drives_the_emulator_and_reads_the_modelled_currents():
    n = 30_000
    with Ppk2Emulator(modelled) as emulator:
        api = open_like_a_user(emulator.port)
        try:
            samples, bits, raw = read_with_ppk2_api(api, n)
            api.stop_measuring()
            time.sleep(0.05)
        finally:
            api.ser.close()
        commands = emulator.commands()
        assert emulator.overflow_samples == 0
    assert [(c.opcode, c.args) for c in commands] == [
        (0x19, b""),
        (0x11, b"\x02"),
        (0x0D, b"\x0c\xe4"),
        (0x0C, b"\x01"),
        (0x06, b""),
        (0x07, b""),
    ]
    # Its modifiers are our calibration (read from our reply, none left at its defaults).
    for r, cal in enumerate(EXAMPLE_METADATA.ranges):
        assert api.modifiers["R"][str(r)] == cal.resistor_ohm
        assert api.modifiers["GS"][str(r)] == cal.gain_quadratic_per_a
        assert api.modifiers["I"][str(r)] == cal.offset_a
    expected, marker = modelled(np.arange(n) / SAMPLE_RATE_HZ)
    got = np.array(samples[:n])
    steady = ~filter_windows(ua_to_codes(EXAMPLE_METADATA, VDD, expected)[0])
    assert np.all(np.abs(got - expected)[steady] <= half_step_ua(expected)[steady])
    assert [b & 1 for b in bits[:n]] == marker.tolist()

    # On the same bytes our decoder agrees with ppk2-api's conversion, spike filter included.
    decoder = Ppk2Decoder(parse_metadata(format_metadata(EXAMPLE_METADATA)), VDD)
    block, last = decoder.feed(raw), decoder.flush()
    # The last words wait for the words after them: a stream that stops inside a word (the
    # read ended there) leaves them unconfirmed; ppk2-api converts them.
    n = len(samples) - (CONFIRM_WORDS if len(raw) % 4 else 0)
    assert len(block) + len(last) == n and decoder.totals.lost_samples == 0
    assert decoder.totals.resyncs == 0
    current = np.concatenate([block.current_ua, last.current_ua])
    np.testing.assert_allclose(current, samples[:n], rtol=1e-12, atol=1e-9)
    assert [*block.logic, *last.logic] == bits[:n]


def test_ppk2_api_loses_dropped_samples_silently_and_the_decoder_counts_them():
    drops = {5_000: 7, 12_000: 30, 20_000: 1}
    device = Ppk2Device(faults=Ppk2Faults(drop_samples=drops))
    with Ppk2Emulator(timestamped, device) as emulator:
        api = open_like_a_user(emulator.port)
        try:
            samples, bits, raw = read_with_ppk2_api(api, 25_000)
            api.stop_measuring()
        finally:
            api.ser.close()
    decoder = Ppk2Decoder(EXAMPLE_METADATA, VDD)
    block, last = decoder.feed(raw), decoder.flush()
    # ppk2-api: a plain list, as long as the words that arrived; nothing says 38 are missing,
    # and from each gap on its k-th sample is no longer the k-th instant (logic = instant % 256).
    n = len(samples) - (CONFIRM_WORDS if len(raw) % 4 else 0)  # as in the test above
    assert bits[4_999:5_001] == [4_999 % 256, 5_007 % 256]
    assert bits[20_000] == (20_000 + 38) % 256
    # Ours: the same values, the loss counted where it happened (with the word either side of
    # each gap, dropped), each sample at its instant.
    assert len(block) + len(last) == n - 2 * len(drops)
    index = np.concatenate([block.index, last.index])
    words = index - [sum(k for s, k in drops.items() if s <= i) for i in index.tolist()]
    current = np.concatenate([block.current_ua, last.current_ua])
    # Where a range changes just after a gap, ppk2-api's spike filter also averaged the words
    # dropped there: the three samples it replaces differ.
    away = np.ones(current.size, dtype=bool)
    for at in block.gap_at.tolist():
        away[at : at + 3] = False
    expected = np.array(samples)[words]
    np.testing.assert_allclose(current[away], expected[away], rtol=1e-12, atol=1e-9)
    assert (index % 256).tolist() == np.array(bits)[words].tolist()
    assert block.lost_samples == 38 + 2 * len(drops) and last.lost_samples == 0
    # At the first sample kept after each gap, less all counted lost before it.
    assert block.gap_at.tolist() == [5_008 - 9, 12_031 - 9 - 32, 20_002 - 9 - 32 - 3]
    assert block.gap_lost.tolist() == [9, 32, 3]
    assert int(index[-1]) + 1 == n + 38


def oracle_converter(metadata: Ppk2Metadata, vdd_mv: int) -> PPK2_API:
    """ppk2-api's conversion without a port: serial.Serial(None) opens nothing; its own parser
    reads our reply; current_vdd is what its set_source_voltage would store."""
    api = PPK2_API(None)
    assert api._parse_metadata(format_metadata(metadata).decode()) is True
    api.current_vdd = vdd_mv
    return api


calibrations = st.builds(
    RangeCalibration,
    resistor_ohm=st.floats(0.01, 2000),
    gain_quadratic_per_a=st.floats(0, 150),
    gain_linear=st.floats(0.8, 1.2),
    offset_counts=st.floats(0, 200),
    supply_slope_a_per_v=st.floats(-1e-3, 1e-3),
    offset_a=st.floats(-1e-2, 1e-2),
    user_gain=st.floats(0.5, 2),
)
metadatas = st.builds(
    lambda ranges: Ppk2Metadata(True, tuple(ranges), 3000, 9102, EXAMPLE_METADATA.mode, 52),
    st.lists(calibrations, min_size=5, max_size=5),
)
words = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 16383), st.integers(0, 255)),
    min_size=1,
    max_size=1500,
)


@settings(max_examples=100, deadline=None)
@given(metadatas, st.integers(800, 5000), words, st.lists(st.integers(0, 6000), max_size=4))
def test_decoder_and_ppk2_api_convert_the_same_words_alike(metadata, vdd_mv, fields, cuts):
    meas_range, code, logic = (np.array(column) for column in zip(*fields, strict=True))
    counter = np.arange(meas_range.size) % 64
    raw = (code | meas_range << 14 | counter << 18 | logic << 24).astype("<u4").tobytes()
    samples, bits = oracle_converter(metadata, vdd_mv).get_samples(raw)
    decoder = Ppk2Decoder(metadata, vdd_mv)
    bounds = [0, *sorted(c % (len(raw) + 1) for c in cuts), len(raw)]
    blocks = [decoder.feed(raw[a:b]) for a, b in itertools.pairwise(bounds)]
    blocks.append(decoder.flush())
    ours = np.concatenate([b.current_ua for b in blocks])
    if meas_range.size < 4:  # too few words to confirm an alignment
        assert ours.size == 0
        return
    scale = np.abs(samples).max()
    np.testing.assert_allclose(ours, samples, rtol=1e-12, atol=scale * 1e-13)
    assert np.concatenate([b.logic for b in blocks]).tolist() == bits
    plain = Ppk2Decoder(metadata, vdd_mv, spike_filter=False)
    unfiltered = np.concatenate([plain.feed(raw).current_ua, plain.flush().current_ua])
    steady = ~filter_windows(meas_range)
    assert np.array_equal(unfiltered[steady], np.array(samples)[steady])  # the same floats


def test_ppk2_api_fills_a_split_reply_from_its_defaults_and_we_refuse_it():
    reply = format_metadata(EXAMPLE_METADATA).decode()
    tail = reply[reply.index("GI0") :]  # what its _read_metadata keeps of a reply in two reads
    api = PPK2_API(None)
    assert api._parse_metadata(tail) is True
    assert api.modifiers["R"]["0"] == 1031.64  # its default, not this device's 1008.2
    with pytest.raises(Ppk2MetadataError, match="lacks key Calibrated"):
        parse_metadata(tail)


def test_ppk2_api_keeps_its_default_for_a_zero_resistor_and_we_refuse_it():
    reply = format_metadata(EXAMPLE_METADATA).decode().replace("R2: 10.214", "R2: 0.0")
    api = PPK2_API(None)
    assert api._parse_metadata(reply) is True
    assert api.modifiers["R"]["2"] == 10.15
    with pytest.raises(Ppk2MetadataError, match="R2 must be a positive"):
        parse_metadata(reply)


def test_ppk2_api_invents_a_sample_from_a_read_of_under_four_bytes():
    api = oracle_converter(EXAMPLE_METADATA, VDD)
    assert len(api.get_samples(b"")[0]) == 1  # an empty read becomes a sample of ADC code 0
    api = oracle_converter(EXAMPLE_METADATA, VDD)
    assert len(api.get_samples(b"\x10\x00")[0]) == 1
    assert api.remainder["len"] < 0  # and its framing is lost from there on
    block = Ppk2Decoder(EXAMPLE_METADATA, VDD).feed(b"\x10\x00")
    assert len(block) == 0
