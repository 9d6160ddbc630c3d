"""Each meter's `meter.resolution` in the manifest (controller/meter/resolution.py, each source's
figures in its folder): the ACS712's 26.4 mA / 132 mW per code the issue quotes, the INA219's
and INA226's shunt LSB, the PPK2's step per range from its own calibration, the Joulescope's
documented finest step; as the sweep's taps and the recording import write them, and as the
report reads an imported run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis.energy_report import meter_facts
from analysis.load import load_run
from controller.cli import main
from controller.config.meter_sources import spec_of
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
from controller.meter_sources.board.resolution import (
    acs712,
    adc_conversion_us,
    board_facts,
    i2c_chip,
)
from controller.meter_sources.board.tap import open_board_tap
from controller.meter_sources.ppk2.resolution import ppk2_facts, ppk2_resolution
from controller.meter_sources.ppk2.tap import Ppk2Tap
from controller.sweep.meter_tap import TapRequest
from tests.meter.test_jls_import import ATTEMPTS, make_recording, make_run

# The keys every source writes (data/README.md's meter.resolution).
FACT_KEYS = {
    "current_ua",
    "power_mw",
    "supply_v",
    "basis",
    "sample_rate_hz",
    "noise_ua",
    "noise_mw",
    "noise_basis",
    "full_scale_ua",
    "full_scale_mw",
    "voltage",
    "conversion_us",
    "bandwidth_hz",
}


def test_an_acs712_code_is_26_mA_and_132_mW_at_5_V() -> None:
    step = acs712(nominal((0,), "5A", 5.0), 0, 1000, 104.0)
    assert step.current_ua == pytest.approx(5000 / 1024 / 185 * 1e6)  # 26.39 mA
    assert step.power_mw == pytest.approx(131.97, abs=0.01)
    assert step.to_dict()["basis"] == "ACS712-5A on A0: 10-bit ADC step 4.883 mV / 185 mV/A"
    assert "ranges" not in step.to_dict()


def test_an_acs712_states_the_datasheets_noise_its_rated_full_scale_and_an_assumed_voltage() -> (
    None
):
    facts = board_facts(MeterConfig(rate_hz=1000, channels=(("client", 0),)))
    assert facts.noise_ua == pytest.approx(21.0 / 6 / 185 * 1e6)  # 18.9 mA rms
    assert facts.noise_basis.startswith("Allegro ACS712 datasheet: 21 mV peak-to-peak")
    # The ADC's rail is (5 V - 2.5 V) / 185 mV/A = 13.5 A away: the rated 5 A clips first.
    assert facts.full_scale_ua == pytest.approx(5e6) and facts.full_scale_mw == 25_000
    assert facts.voltage == "assumed" and facts.sample_rate_hz == 1000
    assert facts.conversion_us == pytest.approx(104.0)  # 13 clocks at 16 MHz / 128
    assert facts.bandwidth_hz == 80e3
    thirty = board_facts(MeterConfig(channels=(("client", 0),), sensor="30A"))
    assert thirty.full_scale_ua == pytest.approx(30e6)  # the rail: 2.5 V / 66 mV/A = 37.9 A


def test_the_board_adc_speeds_up_as_the_firmware_does_when_a_sample_is_crowded() -> None:
    assert adc_conversion_us(1000, 1, 0) == pytest.approx(104.0)
    assert adc_conversion_us(10_000, 1, 0) == pytest.approx(52.0)  # prescaler 64
    assert adc_conversion_us(10_000, 2, 0) == pytest.approx(26.0)  # prescaler 32
    assert adc_conversion_us(10_000, 4, 0) is None  # no prescaler fits: the board refuses


@pytest.mark.parametrize(
    ("shunt_ohm", "step_ua", "full_scale_a"), [(0.1, 25.0, 0.8192), (0.02, 125.0, 4.096)]
)
def test_an_ina226_states_its_shunt_range_and_a_measured_voltage(
    shunt_ohm: float, step_ua: float, full_scale_a: float
) -> None:
    meter = MeterConfig(rate_hz=1000, channels=(("client", 0x140),), shunt_ohm=shunt_ohm)
    facts = board_facts(meter)
    assert facts.current_ua == pytest.approx(step_ua)
    assert facts.full_scale_ua == pytest.approx(full_scale_a * 1e6)
    assert facts.voltage == "measured"
    assert facts.conversion_us == pytest.approx(664.0)  # 2 x 332 us, one average, at 1 kHz
    # 1 uV rms and the 2.5 uV LSB's quantisation, through the shunt
    assert facts.noise_ua == pytest.approx(math.hypot(1.0, 2.5 / math.sqrt(12)) / shunt_ohm)
    assert facts.noise_basis.startswith("INA226 input noise 1 uV rms")


def test_an_ina219_states_its_pga_range_and_its_pair_time() -> None:
    facts = board_facts(MeterConfig(rate_hz=500, channels=(("client", 0x40),), shunt_ohm=0.1))
    assert facts.full_scale_ua == pytest.approx(3.2e6)  # 320 mV at PGA /8 over 0.1 ohm
    assert facts.conversion_us == pytest.approx(1064.0)
    assert facts.noise_ua == pytest.approx(100.0 / math.sqrt(12))
    assert facts.voltage == "measured" and "lower bound" in facts.noise_basis


def test_every_board_and_ppk2_declaration_answers_its_facts_from_a_config() -> None:
    for source in ("serial", "virtual", "simavr", "ppk2"):
        spec = spec_of(source)
        assert spec.facts is not None
        facts = spec.load(spec.facts)(MeterConfig(source=source))
        assert set(facts.to_dict()) >= FACT_KEYS


def test_a_ppk2_states_nordics_figures() -> None:
    facts = ppk2_facts(MeterConfig(source="ppk2", supply_mv=3300))
    assert facts.sample_rate_hz == 100_000 and facts.conversion_us == pytest.approx(10.0)
    assert facts.full_scale_ua == 1e6 and facts.noise_ua == 1000.0
    assert facts.voltage == "assumed" and facts.supply_v == 3.3
    assert facts.noise_mw == pytest.approx(3.3)
    assert "Nordic PPK2 specification" in facts.noise_basis
    assert facts.to_dict()["ranges"] == ppk2_resolution(EXAMPLE_METADATA, 3.3).to_dict()["ranges"]


def test_the_ina_chips_step_is_their_shunt_lsb_over_the_shunt() -> None:
    ina219 = i2c_chip(Ina219Calibration(), 5.0, 500)
    ina226 = i2c_chip(Ina226Calibration(), 5.0, 500)
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
    assert unknown.bandwidth_hz == 250e3 and joulescope("JS220", 5.0).bandwidth_hz == 300e3
    js220 = joulescope("JS220", 5.0)
    assert js220.full_scale_ua == 10e6 and js220.sample_rate_hz == 2e6
    assert js220.voltage == "measured" and js220.noise_ua is None
    assert js220.to_dict()["noise_mw"] is None and js220.to_dict()["full_scale_mw"] == 50_000


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
    assert set(facts["resolution"]) >= FACT_KEYS
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
    assert set(facts["resolution"]) >= FACT_KEYS
    # What the declaration says from the config alone is what the tap records.
    assert facts["resolution"] == board_facts(config).to_dict()


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
    assert facts["noise (rms a sample)"].startswith("not stated: joulescope.com states noise")
    assert facts["full scale"] == "10 A, 5e+04 mW"
    assert facts["voltage"] == "measured"
    assert facts["conversion time"] == "0.5 us; bandwidth 300 kHz"
    assert facts["one step over the median trial"].endswith(" steps")
