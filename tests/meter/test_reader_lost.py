"""A meter reader that stops because its frame handler raised says so, to its owner and up to
the sweep's pause reason, as pyserial's ReaderThread hands the error to connection_lost(exc).
Real pseudo-terminals, real pyserial, real decoder; only the failing handler is made up."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import serial

from controller.config.model import Config
from controller.meter.calibration import nominal
from controller.meter.decoder import FrameDecoder
from controller.meter.protocol import Ack, FrameType, Samples, encode_device_frame
from controller.meter.reader import MeterReadError, SerialReader
from controller.meter.samples import SampleStore
from controller.meter.session import MeterSession
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from controller.meter_sources.board.tap import MeterTap
from controller.run.recorder import RunRecorder
from controller.sweep.engine import SweepEngine
from controller.sweep.plan import plan_trials

AXES = ("initial_window_size",)


def test_a_raising_frame_handler_ends_the_reader_and_its_owner_learns_why(pty_pair):
    master, path = pty_pair
    failure = RuntimeError("frame handler broke")
    handled = threading.Event()
    lost: list[MeterReadError | None] = []

    def on_frames(frames, t_mono_ns):
        handled.set()
        raise failure

    port = serial.Serial(path, 500_000, timeout=0.1, xonxoff=False)
    reader = SerialReader(port, FrameDecoder(), on_frames, on_lost=lost.append)
    reader.start()
    try:
        os.write(master, encode_device_frame(Ack(0, FrameType.IDENTIFY, 0, 0)))
        assert handled.wait(5), "the frame never reached the handler"
        reader.join(5)
        assert not reader.is_alive(), "the reader went on after its handler raised"
    finally:
        reader.stop()
        port.close()
    error = reader.error
    assert error is not None
    assert lost == [error]  # told once, with the same error
    assert error.cause is failure and error.__cause__ is failure
    assert str(error) == (
        f"meter on {path}: decoding or handling its frames failed: "
        "RuntimeError: frame handler broke"
    )


def test_a_stopped_reader_tells_its_owner_there_was_no_error(pty_pair):
    _master, path = pty_pair
    lost: list[MeterReadError | None] = []
    port = serial.Serial(path, 500_000, timeout=0.1, xonxoff=False)
    reader = SerialReader(port, FrameDecoder(), lambda frames, t: None, on_lost=lost.append)
    reader.start()
    reader.stop()
    port.close()
    assert (lost, reader.error) == ([None], None)


class _BrokenStore(SampleStore):
    """A sample store that fails on the first SAMPLES frame: the session's frame handler raises."""

    def add(self, frame: Samples, t_mono_ns: int) -> None:
        raise RuntimeError("sample store broke")


class _IdleNodes:
    """Nodes that never get to run a trial: the meter is lost before the first one."""

    def facts(self) -> Mapping[str, Any]:
        return {}

    def ensure_server(self, settings: Mapping[str, int]) -> None:
        pass

    def fetch(self, trial_id: str, settings: Mapping[str, int], timeout_s: float) -> dict[str, Any]:
        raise AssertionError("a trial ran on a lost meter")

    def server_trial(self, trial_id: str, timeout_s: float) -> dict[str, Any] | None:
        raise AssertionError("a trial ran on a lost meter")

    def client_clock_offset_ns(self) -> int:
        return 0

    def close(self) -> None:
        pass


def test_the_sweep_pauses_naming_what_stopped_the_meter_reader(tmp_path: Path) -> None:
    virtual = VirtualMeter(VirtualMeterOptions(seed=7))
    virtual.start()
    session = MeterSession.open(virtual.port)
    try:
        session.identify()
        session.start()
        tap = MeterTap(session, nominal(), 0, "virtual", {})
        session.samples = _BrokenStore()  # the next SAMPLES frame makes the handler raise
        deadline = time.monotonic() + 5
        while session.reader_error is None and time.monotonic() < deadline:
            time.sleep(0.01)
        recorder = RunRecorder.create(tmp_path / "run", AXES, {"axes": list(AXES)})
        engine = SweepEngine(
            recorder=recorder,
            nodes=_IdleNodes(),
            meter=tap,
            idle_mw=1000.0,
            retries=0,
            trial_timeout_s=10,
            post=lambda event: None,
        )
        point = Config().point((("initial_window_size", 256),))
        outcome = engine.run(plan_trials([point], 1, "sequential", 1))
        recorder.close()
    finally:
        session.close()
        virtual.close()
    reason = (
        f"MeterLost: meter on {virtual.port}: decoding or handling its frames failed: "
        "RuntimeError: sample store broke"
    )
    assert outcome.paused == reason
    assert (outcome.completed, outcome.remaining) == (0, 1)
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert events[-1]["event"] == "sweep_paused" and events[-1]["reason"] == reason
