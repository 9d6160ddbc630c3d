"""Reader and session over a real pseudo-terminal with pyserial on the slave side."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import serial

from controller.errors import MeterError
from controller.meter.commands import Identify
from controller.meter.decoder import CommandFrameDecoder, FrameDecoder
from controller.meter.protocol import Ack, Info, encode_device_frame
from controller.meter.reader import SerialReader
from controller.meter.session import MeterCommandRefused, MeterSession
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from tests.meter._markers import stamped_edge, wait_until_taken

VECTORS = Path(__file__).resolve().parents[2] / "firmware" / "vectors" / "frames.json"


@pytest.fixture
def virtual(tmp_path):
    meter = VirtualMeter(VirtualMeterOptions(marker_fifo=tmp_path / "marker", seed=7))
    meter.start()
    yield meter
    meter.close()


def test_identify_and_configure(virtual):
    with MeterSession.open(virtual.port) as meter:
        info = meter.identify()
        assert (info.protocol_version, info.sample_rate_hz, info.channels) == (2, 1000, (0, 1))
        meter.set_rate(2000)
        meter.set_channels(0x01)
        meter.set_oversampling(2)
        info = meter.identify()
        assert (info.sample_rate_hz, info.channels, info.oversampling) == (2000, (0,), 2)


def test_refused_value_is_a_one_line_user_error(virtual):
    with MeterSession.open(virtual.port) as meter:
        with pytest.raises(MeterCommandRefused) as caught:
            meter.set_rate(3000)
        assert str(caught.value) == f"meter on {virtual.port} refused SET_RATE 3000 Hz: bad value"
        assert caught.value.exit_status == 2


def test_run_delivers_every_sample_index_once(virtual):
    with MeterSession.open(virtual.port) as meter:
        meter.identify()
        meter.set_rate(5000)
        meter.start()
        wait_until_taken(meter, 2500)  # half a second at 5 kHz, in the board's own count
        with pytest.raises(MeterCommandRefused, match="busy"):
            meter.set_rate(1000)
        final = meter.stop()
        window = meter.samples.all()
        health = meter.health()
    assert not final.running
    assert final.samples_dropped == 0
    assert final.samples_taken == len(window.indices) > 2000
    assert (window.indices == np.arange(final.samples_taken)).all()
    assert window.values.shape == (final.samples_taken, 2)
    assert (health.crc_failures, health.frames_missed, health.samples_missing) == (0, 0, 0)
    last_index, t_ns = meter.samples.arrivals()
    assert (np.diff(last_index) > 0).all()
    assert (np.diff(t_ns) >= 0).all()


def test_markers_from_the_fifo_arrive_with_their_sample_index(virtual, tmp_path):
    with MeterSession.open(virtual.port, ack_timeout_s=10) as meter:
        meter.identify()
        meter.start()
        fd = os.open(tmp_path / "marker", os.O_WRONLY | os.O_NONBLOCK)
        try:
            wait_until_taken(meter, 200)  # the edges fall inside the run, not at its start
            rising = stamped_edge(meter, fd, 1)
            wait_until_taken(meter, rising + 200)  # 200 ms at 1 kHz, in the board's own count
            falling = stamped_edge(meter, fd, 0)
        finally:
            os.close(fd)
        meter.stop()
        markers = meter.markers()
    assert [(m.marker.edge, m.sample_index) for m in markers] == [(1, rising), (0, falling)]
    assert falling - rising >= 200


def test_silent_port_is_a_one_line_error(pty_pair):
    _, path = pty_pair
    with MeterSession.open(path) as meter, pytest.raises(MeterError) as caught:
        meter.identify(timeout_s=0.6)
    assert str(caught.value).startswith(f"meter on {path}: no answer to IDENTIFY within 0.6 s")


def test_missing_port_is_a_one_line_error(tmp_path):
    with pytest.raises(MeterError, match=f"meter port {tmp_path}/nope: cannot open"):
        MeterSession.open(str(tmp_path / "nope"))


def test_wrong_protocol_version_is_refused(pty_pair):
    master, path = pty_pair

    def board() -> None:
        decoder = CommandFrameDecoder()
        while True:
            try:
                data = os.read(master, 64)
            except OSError:
                return
            for raw in decoder.feed(data):
                reply = encode_device_frame(Ack(0, raw.frame_type, raw.seq, 0))
                info = Info(1, 3, 9, 0, 0, 1, 16_000_000, 10, 5000, 1000, 3, 1, 500_000, 2, "x")
                os.write(master, reply + encode_device_frame(info))

    threading.Thread(target=board, daemon=True).start()
    with MeterSession.open(path) as meter, pytest.raises(MeterError) as caught:
        meter.identify()
    assert "speaks protocol version 3, this controller speaks 2" in str(caught.value)


def test_reader_passes_every_golden_frame_through_a_pty_with_garbage(pty_pair):
    """XON/XOFF bytes (0x11, 0x13) and sync-like garbage must not disturb anything."""
    master, path = pty_pair
    vectors = [v for v in json.loads(VECTORS.read_text()) if v["type"] < 0x80]
    stream = b"".join(b"\x11\x13\xa5" + bytes.fromhex(v["frame_hex"]) for v in vectors)
    got: list[tuple[object, int]] = []
    port = serial.Serial(path, 500_000, timeout=0.1, xonxoff=False)
    reader = SerialReader(port, FrameDecoder(), lambda fs, t: got.extend((f, t) for f in fs))
    reader.start()
    os.write(master, stream)
    deadline = time.monotonic() + 5
    while len(got) < len(vectors) and time.monotonic() < deadline:
        time.sleep(0.01)
    reader.stop()
    port.close()
    assert [encode_device_frame(f).hex() for f, _ in got] == [v["frame_hex"] for v in vectors]
    assert reader.decoder.stats.bytes_discarded == 3 * len(vectors)
    stamps = [t for _, t in got]
    assert stamps == sorted(stamps)


def test_a_vanished_port_stops_the_session_with_an_error(pty_pair):
    master, path = pty_pair
    meter = MeterSession.open(path)
    os.close(master)
    deadline = time.monotonic() + 5
    while meter.reader_error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert meter.reader_error is not None
    assert str(meter.reader_error).startswith(f"meter on {path}: read failed")
    with pytest.raises(MeterError, match="read failed"):
        meter._send(Identify())
    meter.close()


def test_closing_a_running_session_stops_the_board(virtual):
    with MeterSession.open(virtual.port) as meter:
        meter.identify()
        meter.start()
        wait_until_taken(meter, 1)  # running and streaming when the session closes
    with MeterSession.open(virtual.port) as meter:
        meter.identify()
        assert not meter.get_status().running
