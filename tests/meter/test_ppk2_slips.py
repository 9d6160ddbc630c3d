"""PPK2 byte slips: no sample kept after a lost or added byte carries a byte it did not send.

Before the decoder dropped the words next to a slip, a lost logic byte kept its word with the
next word's ADC byte as its logic, and a byte added after byte 2 kept a word with that byte as
its logic (nearly every random stream): a marker edge the device never sent could end a trial.
"""

from __future__ import annotations

import random
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.meter.ppk2 import EXAMPLE_METADATA, Ppk2Decoder, Ppk2Faults
from controller.meter.ppk2.decoder import CONFIRM_WORDS
from controller.meter.ppk2.store import Ppk2Store, first_pulse
from tests.meter.test_ppk2_decoder import LEVELS_UA, VDD, Decoded, decode, nominal, stream

N = 200


def slipped(kind: str, word: int, byte: int, extra: bytes) -> Ppk2Faults:
    """Byte `byte` (0-3) of sample `word` lost, or `extra` added after it."""
    offset = 4 * word + byte
    if kind == "lost":
        return Ppk2Faults(delete_bytes={offset: 1})
    return Ppk2Faults(insert_bytes={offset + 1: extra})


def random_stream(rnd: random.Random, faults: Ppk2Faults) -> tuple[bytes, np.ndarray, np.ndarray]:
    current = np.array([rnd.choice([*LEVELS_UA, rnd.uniform(0, 1e6)]) for _ in range(N)])
    logic = np.array([rnd.randrange(256) for _ in range(N)], dtype=np.uint8)
    return stream(current, logic=logic, faults=faults), current, logic


def check_every_kept_sample_is_the_devices(raw: bytes, out: Decoded, truth: Decoded) -> None:
    t = out.totals
    assert t.samples + t.lost_samples == N
    assert 4 * t.samples + t.skipped_bytes == len(raw)
    assert out.counter.tolist() == (out.index % 64).tolist()
    assert out.logic.tolist() == truth.logic[out.index].tolist()
    assert out.current_ua.tolist() == truth.current_ua[out.index].tolist()
    # So each change of a logic line between two kept samples is the device's: at the later
    # sample's index, or, after samples that are counted lost, somewhere among them.
    jumps = np.flatnonzero(np.diff(out.index) > 1) + 1
    assert jumps.tolist() == out.gap_at
    assert (np.diff(out.index)[jumps - 1] - 1).tolist() == out.gap_lost


@pytest.mark.parametrize("byte", range(4))
@pytest.mark.parametrize("kind", ["lost", "extra"])
def test_every_byte_position_lost_or_added_over_random_streams(kind, byte):
    dropped = []
    for seed in range(300):
        rnd = random.Random(f"{kind}{byte}{seed}")
        word = rnd.randrange(20, N - 20)
        faults = slipped(kind, word, byte, bytes([rnd.randrange(256)]))
        raw, current, logic = random_stream(rnd, faults)
        out = decode(raw, spike_filter=False)
        check_every_kept_sample_is_the_devices(raw, out, nominal(current, logic))
        assert out.totals.resyncs == 1
        lost = sorted(set(range(N)) - set(out.index.tolist()))
        assert lost == list(range(lost[0], lost[-1] + 1))  # one run, the slip's word in it
        assert lost[0] <= word <= lost[-1]
        dropped.append(len(lost))
    # The price: the words confirming nothing before the slip, the word it hit, one after it.
    assert max(dropped) <= CONFIRM_WORDS + 2


@pytest.mark.parametrize("size", [4, 8])
@pytest.mark.parametrize("byte", range(4))
def test_whole_words_worth_of_bytes_lost_from_inside_a_word_keep_no_joined_word(byte, size):
    # The alignment holds, so no slip is seen (unless the joined range field names no range):
    # the word the loss cuts, two words' bytes, sits beside the counter gap it leaves, and is
    # dropped with it.
    for seed in range(200):
        rnd = random.Random(f"{byte}{size}{seed}")
        faults = Ppk2Faults(delete_bytes={4 * rnd.randrange(20, N - 20) + byte: size})
        raw, current, logic = random_stream(rnd, faults)
        out = decode(raw, spike_filter=False)
        check_every_kept_sample_is_the_devices(raw, out, nominal(current, logic))
        assert out.totals.lost_samples >= size // 4 + 2


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["lost", "extra"]),
    st.integers(0, 3),
    st.integers(10, N - 10),
    st.binary(min_size=1, max_size=3),
    st.lists(st.integers(min_value=0), max_size=4),
    st.randoms(use_true_random=False),
)
def test_a_slip_anywhere_in_a_stream_split_anywhere_keeps_only_the_devices_samples(
    kind, byte, word, extra, cuts, rnd
):
    raw, current, logic = random_stream(rnd, slipped(kind, word, byte, extra))
    out = decode(raw, [c % (len(raw) + 1) for c in cuts], spike_filter=False)
    check_every_kept_sample_is_the_devices(raw, out, nominal(current, logic))


@pytest.mark.parametrize("byte", range(4))
@pytest.mark.parametrize("kind", ["lost", "extra"])
def test_a_slip_inside_a_trial_leaves_its_marker_pulse_whole_and_counted(kind, byte):
    # D0 high for samples 10..89, the slip at sample 50: the pulse ends at 90, not at the slip,
    # and its window counts the samples dropped around the slip and the resync.
    level = np.zeros(N, dtype=np.uint8)
    level[10:90] = 1
    raw = stream(np.full(N, 450.0), logic=level, faults=slipped(kind, 50, byte, b"\x00"))
    decoder = Ppk2Decoder(EXAMPLE_METADATA, VDD)
    store = Ppk2Store(1000)
    for a, b in pairwise(range(0, len(raw) + 97, 97)):
        store.add(decoder.feed(raw[a:b]), 0)
    store.add(decoder.flush(), 0)
    assert first_pulse(store.edges()) == (10, 90)
    assert [(e.stream_index, e.rising) for e in store.edges()] == [(10, True), (90, False)]
    window = store.window(10, 90)
    assert window.resyncs == 1 and 0 < window.samples_lost <= CONFIRM_WORDS + 2
