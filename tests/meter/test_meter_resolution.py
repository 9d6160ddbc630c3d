"""Each meter's `meter.resolution` in the manifest (controller/meter/resolution.py, each source's
figures in its folder): the ACS712's 26.4 mA / 132 mW per code the issue quotes, the INA219's
and INA226's shunt LSB, the PPK2's step per range from its own calibration, the Joulescope's
documented finest step; as the sweep's taps and the recording import write them, and as the
report reads an imported run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.energy_report import meter_facts
from analysis.load import load_run
from controller.cli import main
from controller.config.model import MeterConfig
from controller.meter.calibration import nominal
from controller.meter.ina219 import Ina219Calibration
from controller.meter.ina226 import Ina226Calibration
from controller.meter.jls.resolution import joulescope
from controller.meter.node_power import ModelledMeterOptions
from controller.meter.ppk2 import EXAMPLE_METADATA, RANGE_CEILINGS_UA
from controller.meter.ppk2.decoder import ua_per_code
from controller.meter.ppk2.emulator import Ppk2Emulator
from controller.meter.ppk2.modelled import ModelledPpk2Source
from controller.meter.ppk2.session import Ppk2Session
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from controller.meter_sources.board.resolution import acs712, i2c_chip
from controller.meter_sources.board.tap import open_board_tap
from controller.meter_sources.ppk2.resolution import ppk2_resolution
from controller.meter_sources.ppk2.tap import Ppk2Tap
from controller.sweep.meter_tap import TapRequest
from tests.meter.test_jls_import import ATTEMPTS, make_recording, make_run


def test_an_acs712_code_is_26_mA_and_132_mW_at_5_V() -> None:
    step = acs712(nominal((0,), "5A", 5.0), 0)
    assert step.current_ua == pytest.approx(5000 / 1024 / 185 * 1e6)  # 26.39 mA
    assert step.power_mw == pytest.approx(131.97, abs=0.01)
    assert step.to_dict()["basis"] == "ACS712-5A on A0: 10-bit ADC step 4.883 mV / 185 mV/A"
    assert "ranges" not in step.to_dict()


def test_the_ina_chips_step_is_their_shunt_lsb_over_the_shunt() -> None:
    ina219, ina226 = i2c_chip(Ina219Calibration(), 5.0), i2c_chip(Ina226Calibration(), 5.0)
    assert ina219.current_ua == pytest.approx(100.0)  # 10 uV / 0.1 ohm
    assert ina226.current_ua == pytest.approx(25.0)  # 2.5 uV / 0.1 ohm
    assert ina226.power_mw == pytest.approx(0.125)
    assert ina226.basis.startswith("INA226 shunt register LSB over 0.1 ohm")


def test_a_ppk2_names_a_step_per_range_from_its_calibration() -> None:
    record = ppk2_resolution(EXAMPLE_METADATA, 3.3).to_dict()
    steps = [ua_per_code(c) for c in EXAMPLE_METADATA.ranges]
    assert [r["current_ua"] for r in record["ranges"]] == steps
    assert [r["ceiling_ua"] for r in record["ranges"]] == [*RANGE_CEILINGS_UA, None]
    assert record["current_ua"] == min(steps) and record["supply_v"] == 3.3
    assert record["ranges"][4]["power_mw"] == pytest.approx(steps[4] * 3.3 / 1000)


def test_a_joulescope_step_is_its_documented_finest() -> None:
    assert joulescope("JS220", 5.0).current_ua == pytest.approx(0.0005)
    assert joulescope("js110", 5.0).current_ua == pytest.approx(0.0015)
    unknown = joulescope("", 5.0)
    assert unknown.current_ua == pytest.approx(0.0015)  # the coarser one, said so
    assert unknown.basis.startswith("unknown model (taken as a JS110)")


def test_the_ppk2_tap_records_its_devices_steps(tmp_path: Path) -> None:
    source = ModelledPpk2Source(ModelledMeterOptions(marker_fifo=tmp_path / "m"), supply_mv=5000)
    with Ppk2Emulator(source) as emulator:
        session = Ppk2Session.open(emulator.port, rate_hz=1000)
        try:
            session.drain()
            session.read_metadata()
            session.configure("ampere", 5000)
            facts = Ppk2Tap(session, "ppk2", 5.0, {}).facts()
        finally:
            session.close()
    assert facts["resolution"] == ppk2_resolution(EXAMPLE_METADATA, 5.0).to_dict()
    assert facts["sample_rate_hz"] == 1000 and facts["stream_rate_hz"] == 100_000


@pytest.mark.parametrize(
    ("channel", "current_ua"),
    [(0, 5000 / 1024 / 185 * 1e6), (0x40, 100.0)],
    ids=["acs712", "ina219"],
)
def test_the_arduino_tap_records_its_client_channels_step(channel: int, current_ua: float) -> None:
    meter = VirtualMeter(VirtualMeterOptions(seed=4))
    meter.start()
    try:
        config = MeterConfig(rate_hz=500, channels=(("client", channel),), shunt_ohm=0.1)
        tap = open_board_tap(TapRequest(config, meter.port, {}))
        try:
            facts = tap.facts()
        finally:
            tap.session.close()
    finally:
        meter.close()
    assert facts["resolution"]["current_ua"] == pytest.approx(current_ua)
    assert facts["resolution"]["supply_v"] == 5.0 and facts["sample_rate_hz"] == 500


def test_an_imported_recording_names_the_joulescopes_step_and_the_report_prints_it(
    tmp_path: Path,
) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    recording, _pulses = make_recording(tmp_path / "sweep.jls", ATTEMPTS)
    assert main(["meter", "import", str(run), str(recording)]) == 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["meter"]["resolution"] == joulescope("JS220", 5.0).to_dict()
    # The meter it replaced had none: kept as it was under meter_import.replaced.
    assert "resolution" not in manifest["meter_import"]["replaced"]["meter"]
    facts = dict(meter_facts(load_run(run)))
    assert facts["meter"] == "joulescope"
    assert facts["sample rate (Hz)"] == "1e+06" and facts["trace rate (Hz)"] == "1000"
    assert facts["resolution (current per step)"] == "0.5 nA"
    assert facts["one step over the median trial"].endswith(" steps")
