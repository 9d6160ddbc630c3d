"""The report's meter section (`analysis.energy_report.meter_facts`): the meter's rate and
resolution as the run's manifest names them, one step of it in mJ over the median trial's
window, the auto-ranging meter's step taken in the range the median current sits in, its
noise, full scale, voltage and conversion time, and a plain line for a run whose manifest names
no resolution (or none of the rest)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.energy_report import meter_facts
from analysis.load import load_run
from tests.analysis.fake_run import ACS712_STEP_UA, record_run


def _run(tmp_path: Path, meter: dict[str, Any] | None) -> Any:
    run_dir = record_run(tmp_path / "run", windows=(4096, 65535), repetitions=3)
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    if meter is None:
        del manifest["meter"]
    else:
        manifest["meter"] = meter
    path.write_text(json.dumps(manifest))
    return load_run(run_dir)


def test_one_step_is_the_power_step_held_over_the_median_window(tmp_path: Path) -> None:
    run_dir = record_run(tmp_path / "run", windows=(4096, 65535), repetitions=3)
    run = load_run(run_dir)
    facts = dict(meter_facts(run))
    window_s = float(run.ok["window_s"].median())
    step_mj = ACS712_STEP_UA * 5.0 / 1000 * window_s
    assert facts["meter"] == "virtual"
    assert facts["sample rate (Hz)"] == "250"
    assert facts["resolution (current per step)"] == "26.39 mA"
    assert facts["resolution (mW per step)"] == "132 at 5 V"
    line = facts["one step over the median trial"]
    assert line.startswith(f"{step_mj:.4g} mJ (one step held over the median window, ")
    energy = float(run.ok["energy_mj"].median())
    assert line.endswith(f"{energy / step_mj:.3g} steps")


def test_a_run_without_a_resolution_says_the_step_is_not_known(tmp_path: Path) -> None:
    facts = dict(meter_facts(_run(tmp_path, None)))
    assert facts["meter"] == "virtual"  # from the config
    assert facts["sample rate (Hz)"] == "250 (configured)"
    assert facts["resolution"].startswith("not recorded: this run's manifest names no meter")
    assert "one step over the median trial" not in facts


def test_the_noise_full_scale_voltage_and_conversion_have_a_row_each(tmp_path: Path) -> None:
    facts = dict(meter_facts(load_run(record_run(tmp_path / "run", windows=(4096,)))))
    assert facts["noise (rms a sample)"].startswith("18.92 mA, 94.59 mW at 250 samples/s: ")
    assert facts["full scale"] == "5 A, 2.5e+04 mW"
    assert facts["voltage"] == "assumed 5 V"
    assert facts["conversion time"] == "104 us; bandwidth 80 kHz"


def test_a_run_from_before_meters_stated_their_noise_says_not_recorded(tmp_path: Path) -> None:
    step = {"current_ua": ACS712_STEP_UA, "power_mw": 132.0, "supply_v": 5.0, "basis": "b"}
    facts = dict(meter_facts(_run(tmp_path, {"source": "virtual", "resolution": step})))
    assert facts["resolution (current per step)"] == "26.39 mA"
    for row in ("noise (rms a sample)", "full scale", "voltage", "conversion time"):
        assert facts[row].startswith("not recorded"), row


def test_an_auto_ranging_meter_takes_the_range_of_the_median_current(tmp_path: Path) -> None:
    steps = [0.04, 0.4, 4.0, 40.0, 750.0]
    ceilings: list[float | None] = [500.0, 5_000.0, 50_000.0, 500_000.0, None]
    meter = {
        "source": "ppk2",
        "kind": "ppk2",
        "sample_rate_hz": 1000,
        "stream_rate_hz": 100_000,
        "resolution": {
            "current_ua": 0.04,
            "power_mw": 0.0002,
            "supply_v": 5.0,
            "basis": "PPK2 test ranges",
            "ranges": [
                {"current_ua": s, "power_mw": s * 5 / 1000, "ceiling_ua": c}
                for s, c in zip(steps, ceilings, strict=True)
            ],
        },
    }
    run = _run(tmp_path, meter)
    facts = dict(meter_facts(run))
    current_ua = float(run.ok["mean_power_mw"].median()) / 5.0 * 1000
    assert 50_000 < current_ua < 500_000  # the fake node draws over 1.2 W at 5 V: range 3
    assert facts["stream rate (Hz)"] == "100000"
    assert facts["resolution (current per step)"].startswith("40 uA (range 3, which the median")
    window_s = float(run.ok["window_s"].median())
    assert facts["one step over the median trial"].startswith(f"{40 * 5 / 1000 * window_s:.4g} mJ")


def test_a_current_above_every_ceiling_takes_the_top_range(tmp_path: Path) -> None:
    meter = {
        "source": "ppk2",
        "sample_rate_hz": 1000,
        "resolution": {
            "current_ua": 0.04,
            "supply_v": 5.0,
            "basis": "b",
            "ranges": [
                {"current_ua": 0.04, "ceiling_ua": 500.0},
                {"current_ua": 750.0, "ceiling_ua": None},
            ],
        },
    }
    facts = dict(meter_facts(_run(tmp_path, meter)))
    assert facts["resolution (current per step)"].startswith("750 uA (range 1,")


@pytest.mark.parametrize("resolution", [{"current_ua": 0.5}, {"supply_v": 5.0}, "26 mA"])
def test_a_resolution_record_without_its_figures_is_not_recorded(
    tmp_path: Path, resolution: Any
) -> None:
    meter = {"source": "virtual", "sample_rate_hz": 250, "resolution": resolution}
    facts = dict(meter_facts(_run(tmp_path, meter)))
    assert facts["resolution"].startswith("not recorded")
