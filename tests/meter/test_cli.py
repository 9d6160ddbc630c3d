"""`h2iot meter ...` against the virtual meter run as its own command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli import main
from controller.meter.calibration import Calibration, nominal


def start_virtual(*options: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "meter", "virtual", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    assert port.startswith("/dev/pts/"), process.stderr.read() if process.stderr else ""
    return process, port


def stop_virtual(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0


@pytest.fixture
def virtual_port() -> Iterator[str]:
    process, port = start_virtual("--seed", "1")
    yield port
    stop_virtual(process)


def test_info(virtual_port, capsys):
    assert main(["meter", "info", "--port", virtual_port]) == 0
    out = capsys.readouterr().out
    assert f"board         mega2560 (ATMEGA2560, 16 MHz) on {virtual_port}" in out
    assert "sampling      1000 Hz, A0, A1, oversampling 1" in out
    assert main(["meter", "info", "--port", virtual_port, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["protocol_version"] == 2


def test_read_prints_live_lines_and_a_summary(virtual_port, capsys):
    code = main(
        ["meter", "read", "--port", virtual_port, "--seconds", "1", "--interval", "0.25",
         "--rate", "2000", "--channels", "A0"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count(" mW  (") >= 3
    assert "A0  mean" in out
    assert "A1" not in out.split("--")[-1]
    assert ", 0 missing: 0 dropped by the meter" in out
    assert "link          0 CRC failures, 0 frames missed" in out


def test_calibrate_measures_the_zero_offset_with_no_load(tmp_path, capsys):
    process, port = start_virtual("--no-load", "--zero-offset-mv", "10", "--seed", "2")
    out_file = tmp_path / "cal.json"
    try:
        code = main(
            ["meter", "calibrate", "--port", port, "--variant", "20A", "--supply-v", "5.1",
             "--seconds", "1", "--out", str(out_file)]
        )  # fmt: skip
    finally:
        stop_virtual(process)
    assert code == 0, capsys.readouterr()
    calibration = Calibration.load(out_file)
    expected = 2510 * 1024 / 5000 - 0.5  # mid-scale + 10 mV, less the floor's half LSB
    for channel in calibration.channels:
        assert channel.zero_code == pytest.approx(expected, abs=0.1)
        assert (channel.variant, channel.supply_v, channel.sensitivity_mv_per_a) == (
            "20A",
            5.1,
            100.0,
        )
        assert channel.zero_samples >= 900
    assert calibration.board == "mega2560"
    assert f"written to {out_file}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["meter", "info", "--port", "/dev/no-such-meter"], "--port /dev/no-such-meter: no such"),
        (
            ["meter", "read", "--port", "{port}", "--calibration", "{bad}"],
            "bad.json: channels[0].zero_code: missing",
        ),
        (["meter", "read", "--port", "{port}", "--rate", "3000"], "refused SET_RATE 3000 Hz"),
        (["meter", "read", "--port", "{port}", "--channels", "B7"], "--channels 'B7': expected"),
        (["meter", "virtual", "--watch", "nope"], "--watch 'nope': expected PID"),
    ],
)
def test_user_mistakes_are_one_line_errors_with_status_2(
    virtual_port, tmp_path, capsys, argv, message
):
    bad = tmp_path / "bad.json"
    cal = nominal().to_dict()
    del cal["channels"][0]["zero_code"]
    bad.write_text(json.dumps(cal))
    argv = [a.format(port=virtual_port, bad=bad) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("h2iot: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_virtual_stops_on_sigterm_and_leaves_a_truth_file(tmp_path: Path):
    truth = tmp_path / "truth.csv"
    process, _ = start_virtual("--truth", str(truth))
    stop_virtual(process)
    assert truth.read_text().startswith("start,first_sample_index,end_sample_index,")
