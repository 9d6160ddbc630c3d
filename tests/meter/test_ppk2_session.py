"""The PPK2 session against the emulated PPK2 on a real pty: the drain rule, strict metadata,
counter gaps counted and flagged per window, D0 edges sample-exact."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from controller.meter.node_power import ModelledMeterOptions
from controller.meter.power_model import PI_3B
from controller.meter.ppk2 import EXAMPLE_METADATA, Ppk2Device, Ppk2Faults, Ppk2MetadataError
from controller.meter.ppk2.decoder import ua_per_code
from controller.meter.ppk2.emulator import Ppk2Emulator, constant_source
from controller.meter.ppk2.modelled import ModelledPpk2Source
from controller.meter.ppk2.session import Ppk2Session


def _wait(predicate: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_stream_a_killed_session_left_running_is_drained_before_the_metadata() -> None:
    with Ppk2Emulator(constant_source(1000.0)) as emulator:
        with Ppk2Session.open(emulator.port, rate_hz=1000) as killed:
            killed.read_metadata()
            killed.configure("ampere", 5000)
            killed.start()
            _wait(lambda: killed.store.received > 20_000)
            killed.running = False  # dies without a stop: the PPK2 keeps streaming
        time.sleep(0.1)  # thousands of stale bytes wait in the pty
        with Ppk2Session.open(emulator.port, rate_hz=1000) as session:
            drained = session.drain()
            assert drained > 4000
            meta = session.read_metadata()
            assert meta.ranges == EXAMPLE_METADATA.ranges


def test_a_metadata_reply_that_never_completes_is_refused() -> None:
    # The second piece comes after the session's deadline: what it has is refused, not padded.
    device = Ppk2Device(faults=Ppk2Faults(split_metadata_at=200))
    with (
        Ppk2Emulator(constant_source(0.0), device, split_gap_s=1.0) as emulator,
        Ppk2Session.open(emulator.port, rate_hz=1000, metadata_timeout_s=0.3) as session,
        pytest.raises(
            Ppk2MetadataError, match=r"incomplete after 0.3 s \(200 bytes without a final END"
        ),
    ):
        session.read_metadata()


def test_a_reply_in_pieces_within_the_deadline_is_joined_and_parsed_strictly() -> None:
    device = Ppk2Device(faults=Ppk2Faults(split_metadata_at=200))
    with (
        Ppk2Emulator(constant_source(0.0), device, split_gap_s=0.1) as emulator,
        Ppk2Session.open(emulator.port, rate_hz=1000) as session,
    ):
        assert session.read_metadata().ranges == EXAMPLE_METADATA.ranges


def test_a_counter_gap_is_counted_in_its_window_and_not_repaired() -> None:
    device = Ppk2Device(faults=Ppk2Faults(drop_samples={50_000: 10}))
    with (
        Ppk2Emulator(constant_source(2000.0), device) as emulator,
        Ppk2Session.open(emulator.port, rate_hz=1000) as session,
    ):
        session.drain()
        session.read_metadata()
        session.configure("source", 3300)
        session.start()
        _wait(lambda: session.store.next_index > 80_000)
        session.stop()
    store = session.store
    assert store.lost == 12  # the gap's 10, and the decoder's distrust of the word either side
    hit = store.window(40_000, 60_000)
    assert (hit.samples_lost, hit.gaps) == (12, 1)
    clean = store.window(60_000, 80_000)
    assert (clean.samples_lost, clean.gaps) == (0, 0)
    assert hit.current_ua.size == 200  # 1 kHz bins of 100 samples: the gap's bin is kept
    assert np.allclose(hit.current_ua, 2000.0, rtol=0.01)


def test_d0_edges_are_stamped_with_their_sample() -> None:
    def source(t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logic = ((t_s >= 0.2) & (t_s < 0.35)).astype(np.uint8)
        return np.full(t_s.size, 500.0), logic

    with Ppk2Emulator(source) as emulator, Ppk2Session.open(emulator.port, rate_hz=1000) as session:
        session.drain()
        session.read_metadata()
        session.configure("ampere", 5000)
        session.start()
        _wait(lambda: session.store.next_index > 40_000)
    edges = session.store.edges()
    assert [(e.rising, e.stream_index) for e in edges] == [(True, 20_000), (False, 35_000)]


def test_the_modelled_ppk2_carries_the_power_model_and_the_marker_fifo_sets_d0(
    tmp_path: Path,
) -> None:
    """No watched node: the model's idle board, in uA at 5 V; the FIFO's lines are D0's edges."""
    fifo = tmp_path / "marker.fifo"
    source = ModelledPpk2Source(ModelledMeterOptions(marker_fifo=fifo), supply_mv=5000)
    try:
        with Ppk2Emulator(source) as emulator, Ppk2Session.open(emulator.port) as session:
            session.drain()
            session.read_metadata()
            session.configure("ampere", 5000)
            session.start()
            _wait(lambda: session.store.next_index > 10_000)
            with fifo.open("w") as line:
                line.write("1\n")
                line.flush()
                _wait(lambda: len(session.store.edges()) == 1)
                line.write("0\n")
                line.flush()
                _wait(lambda: len(session.store.edges()) == 2)
            rising, falling = session.store.edges()
            assert rising.rising and not falling.rising
            assert falling.stream_index > rising.stream_index
            window = session.store.window(0, session.store.next_index)
    finally:
        source.close()
    expected_ua = PI_3B.idle_mw / 5.0 * 1000
    assert np.allclose(window.current_ua, expected_ua, rtol=0.01)


def test_ampere_mode_leaves_the_regulator_and_converts_with_the_vdd_it_reports() -> None:
    """No supply given: no 0x0D command, and the decoder's VDD is the metadata's, so a current
    reads back as the device made it (a different VDD shifts its offset term)."""
    with Ppk2Emulator(constant_source(240_000.0)) as emulator:
        with Ppk2Session.open(emulator.port, rate_hz=1000) as session:
            session.drain()
            session.read_metadata()
            session.configure("ampere")
            session.start()
            _wait(lambda: session.store.next_index > 20_000)
            window = session.store.window(0, 20_000)
        names = [c.name for c in emulator.commands()]
    assert "regulator_set" not in names and "set_power_mode" in names
    assert session.vdd_mv == EXAMPLE_METADATA.vdd_mv
    step_ua = ua_per_code(EXAMPLE_METADATA.ranges[3])  # 240 mA is in range 3
    assert np.abs(window.current_ua - 240_000.0).max() <= step_ua / 2
