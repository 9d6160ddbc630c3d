"""End to end on a PPK2 without the hardware: `h2iot sweep configs/local-ppk2.toml`, reduced, as a
researcher runs it, then `h2iot report`; and a PPK2 on a serial port (the emulator on a real pty,
run by this test) that stops streaming mid-sweep, turns to garbage, or answers its metadata wrongly.

The emulated PPK2 of the config follows the client node through the Pi 3B power model, its D0 set
by the client's marker line, and writes the model's exact mean power per averaged sample as the
ground truth: each trial's energy must agree with it within one ADC code of the coarsest range
the trial used, over the trial's window (the PPK2's resolution there).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from analysis.truth import Truth
from controller.energy import energy_in_window
from controller.meter.ppk2 import (
    EXAMPLE_METADATA,
    RANGE_CEILINGS_UA,
    SAMPLE_RATE_HZ,
    Ppk2Device,
)
from controller.meter.ppk2.emulator import Ppk2Emulator, constant_source
from tests._rig import verdicts
from tests.conftest import h2iot
from tests.e2e.floor_report import assert_floor_reported
from tests.e2e.test_local_sweep import SMALL, _rows, _run_dir, _wait_for_rows

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local-ppk2.toml"


def _range_of(current_ua: float) -> int:
    """The PPK2 range that measures this current (the emulated device's auto-ranging)."""
    return int(np.searchsorted(np.array(RANGE_CEILINGS_UA), current_ua, side="right"))


@pytest.mark.slow
def test_the_local_default_on_the_emulated_ppk2_agrees_with_its_ground_truth(
    tmp_path: Path,
) -> None:
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path), *SMALL,
        "--set", "run.repetitions=2",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    run = _run_dir(tmp_path)
    rows = _rows(run)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)

    meter = json.loads((run / "manifest.json").read_text())["meter"]
    assert (meter["source"], meter["kind"], meter["emulated"]) == ("ppk2", "ppk2", "ppk2")
    assert (meter["stream_rate_hz"], meter["sample_rate_hz"]) == (SAMPLE_RATE_HZ, 1000)
    assert meter["marker_input"] == "D0" and meter["mode"] == "ampere"
    steps_ua = meter["resolution_ua_per_code"]
    assert len(steps_ua) == 5 and all(0 < a < b for a, b in itertools.pairwise(steps_ua))
    calibration = meter["calibration"]
    assert calibration["calibrated"] is True and len(calibration["ranges"]) == 5
    assert calibration["hardware_id"] == EXAMPLE_METADATA.hardware_id
    # The conversion's VDD is the regulator's as the device reported it (ampere mode sets none).
    assert meter["vdd_mv"] == EXAMPLE_METADATA.vdd_mv
    assert meter["spike_filter"] is False  # the emulated PPK2 has no range-change transients
    supply_v = meter["power_supply_v"]

    truth = Truth.load(run / meter["ground_truth"]).per_sample(0)
    k = SAMPLE_RATE_HZ // meter["sample_rate_hz"]
    # A truth row is an averaged sample: its time is its stream indices' centre, as the trace's.
    truth_t_s = (np.arange(len(truth)) * k + (k - 1) / 2) / SAMPLE_RATE_HZ
    worst = 0.0
    for row in rows:
        assert row["window_source"] == "marker", row["trial_id"]
        assert int(row["samples_lost"]) == int(row["meter_frame_gaps"]) == 0
        assert int(row["samples_saturated"]) == 0  # a Pi-class load, far under range 4's top
        start_s, window_s = float(row["window_start_s"]), float(row["window_s"])
        # Cut by D0 edges: both ends fall on a 100 kS/s stream index, not on a host clock.
        for edge in (start_s * SAMPLE_RATE_HZ, (start_s + window_s) * SAMPLE_RATE_HZ):
            assert edge == pytest.approx(round(edge), abs=1e-3)
        energy_mj = float(row["energy_mj"])
        assert np.isfinite(energy_mj) and energy_mj > 0 and int(row["samples"]) > 0
        exact_mj = energy_in_window(truth_t_s, truth, start_s, start_s + window_s).energy_mj
        trace = np.load(run / "power" / f"{row['trial_id']}.npy")
        coarsest = _range_of(float(trace[:, 1].max()) / supply_v * 1000)
        resolution_mj = steps_ua[coarsest] * supply_v / 1000 * window_s  # uA x V = uW
        assert abs(energy_mj - exact_mj) <= resolution_mj, (row["trial_id"], exact_mj)
        worst = max(worst, abs(energy_mj - exact_mj) / resolution_mj)
    print(f"worst trial: {worst:.3f} of one code over its window")

    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    text = (run / "report" / "report.md").read_text()
    assert "the ppk2 meter at 1000 Hz" in text
    assert_floor_reported(run / "report")


class _Wire(Ppk2Device):
    """A PPK2 whose stream the test can break: `stall` (nothing more arrives, the port stays
    open) or `garbage` (random bytes instead of sample words), while it streams (its metadata
    reply, sent stopped, stays whole)."""

    def __init__(self) -> None:
        super().__init__()
        self.fault: str | None = None
        self._rng = np.random.default_rng(7)

    def data_to_send(self) -> list[bytes]:
        pieces = super().data_to_send()
        if not self.running:
            return pieces
        if self.fault == "stall":
            return []
        if self.fault == "garbage":
            return [self._rng.integers(0, 256, len(p), dtype=np.uint8).tobytes() for p in pieces]
        return pieces


def _r2_zero() -> Ppk2Device:
    """A PPK2 whose metadata reply says `R2: 0`."""
    ranges = list(EXAMPLE_METADATA.ranges)
    ranges[2] = dataclasses.replace(ranges[2], resistor_ohm=0.0)
    return Ppk2Device(dataclasses.replace(EXAMPLE_METADATA, ranges=tuple(ranges)))


def _garbled() -> Ppk2Device:
    wire = _Wire()
    wire.fault = "garbage"
    return wire


def _start_sweep(out: Path, port: str, *sets: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "controller.cli", "sweep", str(CONFIG), "--no-dashboard"]
    command += ["--out", str(out), *SMALL, "--set", f"meter.port={port}"]
    for setting in sets:
        command += ["--set", setting]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["stall", "garbage"])
def test_a_ppk2_that_stops_or_sends_garbage_mid_sweep_pauses_it_in_one_line(
    tmp_path: Path, fault: str
) -> None:
    """On a port (no marker wire: clock windows). Trials recorded before the fault keep their
    energy; the one it broke is not recorded as measured; the pause names the PPK2."""
    device = _Wire()
    current_ua = 300_000.0  # 1.5 W at 5 V, range 3
    with Ppk2Emulator(constant_source(current_ua), device) as emulator:
        controller = _start_sweep(tmp_path, emulator.port, "run.repetitions=20")
        run = _wait_for_rows(tmp_path, controller, 2)
        with emulator.locked():
            device.fault = fault
        stdout, stderr = controller.communicate(timeout=120)
    assert controller.returncode == 3, stdout + stderr
    (paused,) = [line for line in stdout.splitlines() if "paused: MeterLost" in line]
    assert f"PPK2 {emulator.port}" in paused and "has not arrived" in paused, paused
    # A garbled line is told from a silent one.
    assert ("bytes read were not sample words" in paused) == (fault == "garbage"), paused
    assert f"--resume {run}" in stdout
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "sweep_paused"
    rows = _rows(run)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) >= 2 and len(ok) < 40
    steps_ua = json.loads((run / "manifest.json").read_text())["meter"]["resolution_ua_per_code"]
    step_mw = steps_ua[_range_of(current_ua)] * 5.0 / 1000
    for row in ok:
        assert int(row["samples"]) > 0 and int(row["samples_lost"]) == 0
        # Measured, not filled in: the constant current's power, within one code.
        assert abs(float(row["mean_power_mw"]) - current_ua * 5.0 / 1000) <= step_mw


@pytest.mark.slow
def test_a_ppk2_whose_metadata_is_wrong_is_refused_in_one_line_before_any_trial(
    tmp_path: Path,
) -> None:
    """A reply with R2: 0 (some devices send it; ppk2-api would keep its default resistor)."""
    with Ppk2Emulator(constant_source(1000.0), _r2_zero()) as emulator:
        result = h2iot(
            "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path), *SMALL,
            "--set", f"meter.port={emulator.port}",
        )  # fmt: skip
        started = emulator.device.starts
    assert result.returncode != 0, result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("h2iot: error: PPK2 on ") and "R2" in line, line
    assert started == 0  # never streamed
    runs = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert all(not (p / "trials.csv").exists() or not _rows(p) for p in runs)


@pytest.mark.slow
# Its marker loop times a pulse against the edges the emulated PPK2 saw (it reads the marker
# line every millisecond), which other tests' load stretches, as for the other rig checks.
@pytest.mark.quiet
def test_rig_check_on_the_emulated_ppk2() -> None:
    result = h2iot("rig", "check", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    found = verdicts(result.stdout)
    status, detail = found["board identity"]
    assert status == "UNAVAILABLE"  # nothing is plugged in: not a pass
    assert f"PPK2 hardware {EXAMPLE_METADATA.hardware_id}, calibrated" in detail, detail
    status, detail = found["sample stream"]
    assert status == "PASS" and "0 lost in 0 counter gaps, 0 framing resyncs" in detail, detail
    assert found["idle power client"][0] == "PASS"
    assert found["marker loop"][0] == "PASS", found["marker loop"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("device", "check", "says"),
    [(_r2_zero, "meter", "R2"), (_garbled, "sample stream", "none a sample word")],
    ids=["wrong metadata", "garbage"],
)
def test_rig_check_names_a_ppk2_that_answers_wrongly_or_sends_garbage(
    device: Callable[[], Ppk2Device], check: str, says: str
) -> None:
    with Ppk2Emulator(constant_source(1000.0), device()) as emulator:
        result = h2iot("rig", "check", str(CONFIG), "--set", f"meter.port={emulator.port}")
    assert result.returncode == 1, result.stdout + result.stderr
    found = verdicts(result.stdout)
    assert found["meter port"][0] == "PASS"
    status, detail = found[check]
    assert status == "FAIL" and says in detail, detail
    if check != "meter":  # the metadata was whole: the device's identity passed
        assert found["board identity"][0] == "PASS"
        # No marker wire on a port unless the config names one: unavailable, not failed.
        assert found["marker loop"][0] == "UNAVAILABLE"
