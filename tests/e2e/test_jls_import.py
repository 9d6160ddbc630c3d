"""End to end: a short real sweep (`h2iot sweep` on the local default, virtual meter), then a
Joulescope recording of it made from the run's own trial times with known power, imported
with `h2iot meter import`, then `h2iot report`, which shows the recording's energy."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from controller.meter.jls.synthetic import Layout, write_recording
from tests.e2e.floor_report import assert_floor_reported

H2IOT = [sys.executable, "-m", "controller.cli"]
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local.toml"
SMALL = [
    "--set", "workload.total_bytes=600000",
    "--set", "run.idle_baseline_s=1",
    "--set", "sweep.initial_window_size=[1024, 65535]",
    "--set", "run.repetitions=2",
]  # fmt: skip
RATE = 1_000_000
IDLE_MARGIN_S = 2.0  # the recording starts this long before the idle baseline the import takes
IDLE_A, VOLTS = 0.24, 5.0


def _h2iot(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*H2IOT, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


def _trial_amps(n: int) -> float:
    """Each trial's own current, so a trial matched to the wrong pulse shows."""
    return 0.3 + 0.05 * n


def test_a_recording_of_a_real_sweep_gives_the_run_its_energy(tmp_path: Path) -> None:
    swept = _h2iot("sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path), *SMALL)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = _rows(run)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    virtual = [float(r["energy_mj"]) for r in rows]

    # What a JS220 on GPI0 would have recorded: the marker high over each fetch, by the
    # client's own clock (one clock here), and a known power in each trial.
    # The recording starts before the idle baseline: `run.idle_baseline_s` before t1's
    # trial_started event (however long its agent then took to start), and a margin more.
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    started_ns = next(e["t_wall_ns"] for e in events if e["event"] == "trial_started")
    origin_ns = started_ns - round((1.0 + IDLE_MARGIN_S) * 1e9)
    pulses = [
        (
            round((int(r["t_wall_start_ns"]) - origin_ns) * RATE / 1e9),
            round((int(r["t_wall_end_ns"]) - origin_ns) * RATE / 1e9),
        )
        for r in rows
    ]
    starts = np.array([p[0] for p in pulses])
    ends = np.array([p[1] for p in pulses])
    amps = np.array([_trial_amps(n) for n in range(len(rows))])

    def current(indices: np.ndarray) -> np.ndarray:
        which = np.searchsorted(starts, indices, side="right") - 1
        inside = (which >= 0) & (indices < ends[np.clip(which, 0, None)])
        return np.where(inside, amps[np.clip(which, 0, None)], IDLE_A)

    def voltage(indices: np.ndarray) -> np.ndarray:
        return np.full(len(indices), VOLTS)

    recording = write_recording(
        tmp_path / "sweep.jls",
        pulses[-1][1] + RATE // 2,
        current,
        voltage,
        pulses,
        layout=Layout(rate_hz=RATE, signals=("current", "voltage", "gpi[0]", "gpi[1]")),
    )

    # The run has the virtual meter's energy: refused, in one line, unless --replace.
    refused = _h2iot("meter", "import", str(run), str(recording))
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"h2iot: error: {run / 'trials.csv'}: 4 trials already have energy (meter virtual, "
        "first t1): --replace to overwrite them with the recording's"
    ]
    imported = _h2iot("meter", "import", str(run), str(recording), "--replace")
    assert imported.returncode == 0, imported.stderr
    assert f"{recording}: JS220 003141 at 1e+06 Hz, 4 marker pulses matched" in imported.stdout

    rows = _rows(run)
    # The file's float32 samples, multiplied as the import does, in float64.
    watts = float(np.float32(VOLTS)) * amps.astype(np.float32).astype(np.float64)
    expected = []
    for n, (row, pulse) in enumerate(zip(rows, pulses, strict=True)):
        window_s = (pulse[1] - pulse[0]) / RATE
        # Constant power over the pulse, and power piecewise linear between samples: the
        # last step, from the pulse's last high sample to its first low one, falls to idle.
        idle_w = float(np.float32(VOLTS)) * float(np.float32(IDLE_A))
        energy = 1000.0 * (float(watts[n]) * window_s - (float(watts[n]) - idle_w) / 2 / RATE)
        expected.append(energy)
        assert float(row["energy_mj"]) == pytest.approx(energy, abs=2e-6), row["trial_id"]
        assert float(row["energy_above_idle_mj"]) == pytest.approx(
            energy - IDLE_A * VOLTS * 1000 * window_s, abs=1e-3
        )
        assert row["window_source"] == "marker"
    assert [float(r["energy_mj"]) for r in rows] != virtual
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["meter"]["source"] == "joulescope"
    assert manifest["idle_baseline"]["source"] == "recording"
    assert manifest["idle_baseline_mw"] == pytest.approx(IDLE_A * VOLTS * 1000, rel=1e-6)

    reported = _h2iot("report", str(run))
    assert reported.returncode == 0, reported.stdout + reported.stderr
    (report_dir,) = {p.parent for p in run.rglob("report.md")}
    markdown = (report_dir / "report.md").read_text()
    assert "the joulescope meter at 1e+06 Hz" in markdown
    assert_floor_reported(report_dir)
    with (report_dir / "summary.csv").open() as handle:
        summary = [r for r in csv.DictReader(handle) if r["metric"] == "energy_mj"]
    by_point: dict[str, list[float]] = {}
    for row, energy in zip(rows, expected, strict=True):
        by_point.setdefault(row["initial_window_size"], []).append(energy)
    assert {r["initial_window_size"]: float(r["mean"]) for r in summary} == pytest.approx(
        {point: float(np.mean(values)) for point, values in by_point.items()}, abs=1e-5
    )
