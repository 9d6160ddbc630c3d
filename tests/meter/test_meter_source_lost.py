"""A sweep's meter source that goes away: the simavr harness killed, a serial port that does not
exist. The driver's error goes to its owner (no "Exception in thread" traceback), a missing port
is the config's mistake: exit 2, one line (issue 13, item 13)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from controller.config import load_config
from controller.config.model import MeterConfig
from controller.errors import ConfigError, MeterError
from controller.meter.calibration import nominal
from controller.meter.node_power import WatchSpec
from controller.meter.session import MeterSession
from controller.meter.virtual import VirtualMeter
from controller.meter_sources.board.tap import MeterTap
from controller.sweep.errors import MeterLost
from controller.sweep.setup import _device, open_sweep
from tests.conftest import h2iot
from tests.meter.test_simulate import harness_buildable  # noqa: F401  (a fixture)


def _harness() -> psutil.Process:
    (harness,) = [
        child for child in psutil.Process().children() if child.name().startswith("h2iot_sim")
    ]
    return harness


@pytest.mark.slow
def test_a_killed_harness_hands_its_error_to_the_meter_owner(
    harness_buildable,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    escaped: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    watch = (WatchSpec("pid", str(os.getpid())),)
    with _device(MeterConfig(source="simavr"), watch, tmp_path, None) as (port, facts, error):
        session = MeterSession.open(port)
        try:
            session.identify()
            session.start()
            tap = MeterTap(session, nominal(), 0, "simavr", facts, source_error=error)
            tap.begin_trial()
            _harness().send_signal(signal.SIGKILL)
            deadline = time.monotonic() + 10
            while error() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert isinstance(error(), MeterError)
            assert str(error()).startswith("simulator exited with -9")
            while session.reader_error is None and time.monotonic() < deadline:
                time.sleep(0.02)
            with pytest.raises(MeterLost) as lost:
                tap.begin_trial()
        finally:
            session.close()
    assert escaped == []
    assert f"meter on {port}: " in str(lost.value)
    assert "(simavr: simulator exited with -9" in str(lost.value)
    assert lost.value.__cause__ is error()


def test_a_virtual_meter_whose_thread_fails_is_named_when_its_samples_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    escaped: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    watch = (WatchSpec("pid", str(os.getpid())),)
    with _device(MeterConfig(source="virtual"), watch, tmp_path, None) as (port, facts, error):
        session = MeterSession.open(port)
        try:
            session.identify()
            session.start()
            tap = MeterTap(session, nominal(), 0, "virtual", facts, source_error=error)
            tap.begin_trial()
            deadline = time.monotonic() + 10
            while session.samples.next_index < 100 and time.monotonic() < deadline:
                time.sleep(0.01)

            def broken(self: VirtualMeter) -> None:
                raise RuntimeError("device model broke")

            monkeypatch.setattr(VirtualMeter, "_flush_output", broken)
            while error() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            now = time.time_ns()
            with pytest.raises(MeterLost) as lost:
                tap.window(now, now + 10_000_000_000)  # samples that will never come
        finally:
            session.close()
    assert escaped == []
    assert str(lost.value).endswith(
        "after the trial ended (virtual: virtual-meter failed: RuntimeError: device model broke)"
    )
    assert lost.value.__cause__ is error()


def test_a_serial_port_that_does_not_exist_is_a_config_mistake(tmp_path: Path) -> None:
    config = load_config(None, ("meter.source=serial", f"meter.port={tmp_path}/ttyACM9"))
    with pytest.raises(ConfigError) as caught, open_sweep(config, tmp_path / "run"):
        pass
    assert str(caught.value) == f"--set: meter.port: {tmp_path}/ttyACM9: no such device"
    assert not (tmp_path / "run").exists()


def test_sweep_with_a_missing_serial_port_exits_2_in_one_line(tmp_path: Path) -> None:
    port = tmp_path / "ttyUSB7"
    config = tmp_path / "serial.toml"
    config.write_text(f'[meter]\nsource = "serial"\nport = "{port}"\n')
    result = h2iot("sweep", str(config), "--no-dashboard", "--out", str(tmp_path / "runs"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == f"h2iot: error: {config}: meter.port: {port}: no such device\n"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
