"""`h2iot meter import RUN_DIR RECORDING.jls`: a pyjls-written recording in the UI's layout
imported into a run as a live meter would have written it, or refused in one line with the run
left as it was."""

from __future__ import annotations

import csv
import json
import math
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from analysis.trial_columns import header
from controller.cli import main
from controller.cli.meter import sweep_rules
from controller.meter.jls.run import ImportOptions, import_recording
from controller.meter.jls.synthetic import Layout, write_recording
from controller.run.recorder import RunRecorder

RATE = 1_000_000
T0 = 1_796_000_000_000_000_000  # the first trial's start on the client's clock
LEAD_S = 2.0  # the recording starts this long before the first trial
STARTED_S = 0.3  # trial_started is logged this long before its client starts
IDLE_A, VOLTS = 0.24, 5.0  # 1.2 W idle
METER_COLUMNS = {
    "energy_mj",
    "energy_above_idle_mj",
    "mean_power_mw",
    "window_s",
    "window_start_s",
    "window_source",
    "samples",
    "samples_lost",
    "samples_saturated",
    "meter_crc_errors",
    "meter_frame_gaps",
}


@dataclass(frozen=True)
class Attempt:
    trial_id: str
    duration_s: float
    gap_s: float = 0.4  # until the next attempt's start
    status: str = "ok"
    attempt: int = 1
    extra_a: float = 0.1  # current above idle during the trial


def _schedule(attempts: list[Attempt]) -> list[tuple[Attempt, int, int]]:
    """Each attempt with its start and end on the client's clock (ns)."""
    out, start = [], T0
    for a in attempts:
        out.append((a, start, start + round(a.duration_s * 1e9)))
        start += round((a.duration_s + a.gap_s) * 1e9)
    return out


def make_run(run_dir: Path, attempts: list[Attempt], *, energy: bool = False, **config) -> Path:
    manifest = {
        "run_id": run_dir.name,
        "axes": ["initial_window_size"],
        "workload": {"kind": "page", "columns": []},
        "config": {
            "run": {"idle_baseline_s": 1.0, "confidence": 0.9},
            "energy": {"window": config.get("window", "fetch"), "idle_tolerance_mw": 5.0},
            "meter": {"source": "virtual", "rate_hz": 1000},
            "sweep": {"initial_window_size": [1024, 65535]},
        },
        "meter": {"source": "virtual", "sample_rate_hz": 1000, "ground_truth": "meter-truth.csv"},
        "idle_baseline_mw": 1190.0,
        "idle_baseline_s": 1.0,
        "idle_baseline": {"mean_mw": 1190.0, "quiet": True},
        "idle_baseline_end": {"mean_mw": 1195.0, "change_mw": 5.0},
        "energy_window": config.get("window", "fetch"),
        "nodes": {"client": {"clock": {"wall_offset_ns": 0}}},
    }
    recorder = RunRecorder.create(run_dir, ("initial_window_size",), manifest)
    events = []
    for index, (a, start, end) in enumerate(_schedule(attempts)):
        events.append(
            {
                "t_wall_ns": start - round(STARTED_S * 1e9),
                "event": "trial_started",
                "trial_id": a.trial_id,
                "attempt": a.attempt,
            }
        )
        row = {
            "trial_id": a.trial_id,
            "attempt": a.attempt,
            "status": a.status,
            "error": "" if a.status == "ok" else "timeout: the page trial took too long",
            "order_index": index,
            "block": 0,
            "repetition": 1,
            "workload": "page",
            "initial_window_size": 1024 if index % 2 else 65535,
            "t_wall_start_ns": start,
            "t_wall_end_ns": end,
            "client_response_s": a.duration_s,
            "client_cpu_s": a.duration_s / 3,
        }
        if energy and a.status == "ok":
            row.update(energy_mj=99.0, window_s=a.duration_s, window_source="marker", samples=9)
        recorder.append_trial(row)
    recorder.close()
    with (run_dir / "events.jsonl").open("w") as handle:
        handle.writelines(json.dumps(e) + "\n" for e in events)
    return run_dir


def _pulses(attempts: list[Attempt]) -> list[tuple[int, int]]:
    origin = T0 - round(LEAD_S * 1e9)
    return [
        (round((s - origin) * RATE / 1e9), round((e - origin) * RATE / 1e9))
        for _, s, e in _schedule(attempts)
    ]


def _waveforms(attempts: list[Attempt], pulses: list[tuple[int, int]]):
    starts = np.array([p[0] for p in pulses])
    ends = np.array([p[1] for p in pulses])
    extra = np.array([a.extra_a for a in attempts])

    def current(indices: np.ndarray) -> np.ndarray:
        which = np.searchsorted(starts, indices, side="right") - 1
        inside = (which >= 0) & (indices < ends[np.clip(which, 0, None)])
        return IDLE_A + np.where(inside, extra[np.clip(which, 0, None)], 0.0)

    def voltage(indices: np.ndarray) -> np.ndarray:
        return VOLTS + 0.01 * np.sin(indices / 997.0)  # a supply's ripple: i x v, not i x 5

    return current, voltage


def make_recording(
    path: Path, attempts: list[Attempt], pulses: list[tuple[int, int]] | None = None, **layout
) -> tuple[Path, list[tuple[int, int]]]:
    """The recording of `attempts` (or of the `pulses` given), 0.5 s past the last."""
    truth = _pulses(attempts)
    pulses = truth if pulses is None else pulses
    length = max(p[1] for p in pulses) + RATE // 2
    current, voltage = _waveforms(attempts, truth)
    signals = layout.pop("signals", ("current", "voltage", "power", "gpi[0]", "gpi[1]"))
    drops = layout.pop("drops", ())
    write_recording(path, length, current, voltage, pulses, drops=drops,
                    layout=Layout(rate_hz=RATE, signals=signals, **layout))  # fmt: skip
    return path, pulses


def expected_energy_mj(attempts: list[Attempt], pulse: tuple[int, int]) -> float:
    """The integral written into the file: float32 current x float32 voltage, trapezoids."""
    current, voltage = _waveforms(attempts, _pulses(attempts))
    indices = np.arange(pulse[0], pulse[1] + 1)
    i = current(indices).astype(np.float32).astype(np.float64)
    v = voltage(indices).astype(np.float32).astype(np.float64)
    return float(np.trapezoid(i * v * 1000.0, indices / RATE))


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


def _snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


ATTEMPTS = [
    Attempt("t1", 0.120, extra_a=0.10),
    Attempt("t2", 0.305, extra_a=0.25),
    Attempt("t3", 0.080, extra_a=0.05),
    Attempt("t4", 0.210, extra_a=0.40),
]


def test_each_trial_gets_the_energy_written_into_the_recording(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    before = _rows(run)
    recording, pulses = make_recording(tmp_path / "sweep.jls", ATTEMPTS)
    assert main(["meter", "import", str(run), str(recording)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0]
        == f"{recording}: JS220 003141 at 1e+06 Hz, 4 marker pulses matched to the run's trials"
    )
    assert (
        out[1].startswith("4 trials with energy (")
        and "idle 1200.0 mW (from the recording)" in out[1]
    )
    assert out[2] == f"report: h2iot report {run}"
    rows = _rows(run)
    manifest = json.loads((run / "manifest.json").read_text())
    idle_mw = IDLE_A * 1000 * VOLTS
    for row, old, attempt, pulse in zip(rows, before, ATTEMPTS, pulses, strict=True):
        energy = expected_energy_mj(ATTEMPTS, pulse)
        window_s = (pulse[1] - pulse[0]) / RATE
        assert float(row["energy_mj"]) == pytest.approx(energy, abs=1e-6)  # rounded to 1 nJ
        assert float(row["window_s"]) == pytest.approx(window_s, abs=1e-12)
        assert float(row["window_s"]) == pytest.approx(attempt.duration_s, abs=1e-6)
        assert float(row["window_start_s"]) == pytest.approx(pulse[0] / RATE)
        assert float(row["energy_above_idle_mj"]) == pytest.approx(
            energy - manifest["idle_baseline_mw"] * window_s, abs=1e-5
        )
        assert float(row["mean_power_mw"]) == pytest.approx(energy / window_s, rel=1e-6)
        assert row["window_source"] == "marker"
        assert int(row["samples"]) == pulse[1] - pulse[0] + 1
        assert row["samples_lost"] == row["samples_saturated"] == row["meter_crc_errors"] == "0"
        assert row["meter_frame_gaps"] == "0"
        # Nothing but the meter's columns changed.
        assert {k: v for k, v in row.items() if k not in METER_COLUMNS} == {
            k: v for k, v in old.items() if k not in METER_COLUMNS
        }
        trace = np.load(run / "power" / f"{row['trial_id']}.npy")
        assert trace.dtype == np.float64 and trace.shape[1] == 2
        # 1 kHz bins (the run's meter.rate_hz), seconds from the window's start, two beyond.
        assert np.all(np.diff(trace[:, 0]) == pytest.approx(0.001))
        assert trace[0, 0] < 0 and trace[-1, 0] > window_s
        inside = (trace[:, 0] > 0.001) & (trace[:, 0] < window_s - 0.001)
        assert trace[inside, 1] == pytest.approx(
            (IDLE_A + attempt.extra_a) * VOLTS * 1000, rel=0.003
        )
    assert (run / "trials.csv").read_text().splitlines()[0].split(",") == header(
        ("initial_window_size",)
    )
    meter = manifest["meter"]
    assert meter["source"] == meter["kind"] == "joulescope"
    assert meter["sample_rate_hz"] == RATE and meter["trace_rate_hz"] == 1000
    assert meter["instrument"]["model"] == "JS220" and meter["marker_input"] == "gpi[0]"
    assert meter["power_from"] == "current x voltage" and meter["pulses"] == 4
    assert meter["drops"] == meter["samples_dropped"] == 0
    assert meter["recording"] == str(recording.resolve())
    assert manifest["idle_baseline_mw"] == pytest.approx(idle_mw, abs=0.05)  # ripple averaged
    idle = manifest["idle_baseline"]
    assert idle["source"] == "recording" and idle["quiet"] is True
    # The second before trial_started, 0.3 s before the first pulse.
    assert idle["end_s"] == pytest.approx(LEAD_S - STARTED_S, abs=1e-6)
    assert idle["start_s"] == pytest.approx(LEAD_S - STARTED_S - 1.0, abs=1e-6)
    assert "idle_baseline_end" not in manifest
    replaced = manifest["meter_import"]["replaced"]
    assert replaced["meter"]["source"] == "virtual"
    assert (
        replaced["idle_baseline_mw"] == 1190.0 and replaced["idle_baseline_end"]["mean_mw"] == 1195
    )
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "meter_imported" and events[-1]["trials"] == 4


def _refused(run: Path, recording: Path, capsys, *extra: str) -> str:
    before = _snapshot(run)
    assert main(["meter", "import", str(run), str(recording), *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert _snapshot(run) == before  # the run untouched
    return lines[0]


def test_a_recording_with_a_missing_pulse_is_refused_and_the_run_untouched(
    tmp_path: Path, capsys
) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    pulses = _pulses(ATTEMPTS)
    recording, _ = make_recording(tmp_path / "sweep.jls", ATTEMPTS, [*pulses[:1], *pulses[2:]])
    line = _refused(run, recording, capsys)
    assert line == (
        f"h2iot: error: {recording}: pulse 2 (at 3.225000 s) does not match trial t2: lasts "
        "0.080000 s, the trial 0.305000 s (3 pulses in the recording, 4 trials in the run)"
    )


def test_a_recording_with_an_extra_pulse_is_refused_and_the_run_untouched(
    tmp_path: Path, capsys
) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    pulses = _pulses(ATTEMPTS)
    # A glitch of 10 ms between t2 and t3 (a second wire touching GPI0, a rig check's pulse).
    glitch = (pulses[1][1] + 100_000, pulses[1][1] + 110_000)
    recording, _ = make_recording(
        tmp_path / "sweep.jls", ATTEMPTS, [*pulses[:2], glitch, *pulses[2:]]
    )
    line = _refused(run, recording, capsys)
    assert line.startswith(f"h2iot: error: {recording}: pulse 3 (at 2.925000 s) does not match")
    assert line.endswith("trial t3: lasts 0.010000 s, the trial 0.080000 s (5 pulses in the "
                         "recording, 4 trials in the run)")  # fmt: skip


def test_a_pulse_left_over_after_the_last_trial_is_refused(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    pulses = _pulses(ATTEMPTS)
    late = (pulses[-1][1] + 200_000, pulses[-1][1] + 300_000)
    recording, _ = make_recording(tmp_path / "sweep.jls", ATTEMPTS, [*pulses, late])
    line = _refused(run, recording, capsys)
    assert line.endswith("pulse 5 (at 4.115000 s) has no trial: 5 pulses in the recording, "
                         "4 trials in the run")  # fmt: skip


def test_a_recording_started_mid_trial_says_so(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    pulses = _pulses(ATTEMPTS)
    recording, _ = make_recording(tmp_path / "sweep.jls", ATTEMPTS, [(0, 5000), *pulses[1:]])
    line = _refused(run, recording, capsys, "--idle-mw", "1200")
    assert "pulse 1 (at 2.520000 s) does not match trial t1: lasts 0.305000 s" in line
    assert line.endswith("; the marker was already high when the recording started")


def test_a_run_that_has_energy_is_refused_without_replace(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS, energy=True)
    recording, pulses = make_recording(tmp_path / "sweep.jls", ATTEMPTS)
    line = _refused(run, recording, capsys)
    assert line == (
        f"h2iot: error: {run / 'trials.csv'}: 4 trials already have energy (meter virtual, "
        "first t1): --replace to overwrite them with the recording's"
    )
    assert main(["meter", "import", str(run), str(recording), "--replace"]) == 0
    assert "4 trials' earlier energy replaced" in capsys.readouterr().out
    first = _rows(run)
    assert float(first[0]["energy_mj"]) == pytest.approx(
        expected_energy_mj(ATTEMPTS, pulses[0]), abs=1e-6
    )
    # Imported again: the same numbers, and the sweep's own meter still the one replaced.
    assert main(["meter", "import", str(run), str(recording), "--replace"]) == 0
    assert _rows(run) == first
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["meter_import"]["replaced"]["meter"]["source"] == "virtual"


def test_a_failed_attempt_takes_its_pulse_and_gets_no_energy(tmp_path: Path) -> None:
    attempts = [
        Attempt("t1", 0.1),
        Attempt("t2", 0.05, status="failed"),
        Attempt("t2", 0.2, attempt=2, extra_a=0.3),
        Attempt("t3", 0.15),
    ]
    run = make_run(tmp_path / "run", attempts)
    recording, pulses = make_recording(tmp_path / "sweep.jls", attempts)
    result = import_recording(run, recording, sweep_rules())
    assert [t.trial_id for t in result.trials] == ["t1", "t2", "t3"]
    assert [t.pulse for t in result.trials] == [1, 3, 4]
    rows = _rows(run)
    assert rows[1]["status"] == "failed" and rows[1]["energy_mj"] == ""
    assert float(rows[2]["energy_mj"]) == pytest.approx(
        expected_energy_mj(attempts, pulses[2]), abs=1e-6
    )
    assert sorted(p.name for p in (run / "power").iterdir()) == ["t1.npy", "t2.npy", "t3.npy"]
    trace = np.load(run / "power" / "t2.npy")  # the ok attempt's: 0.2 s, not the failed 0.05
    assert 0.2 < trace[-1, 0] < 0.21


def test_the_idle_power_can_be_given_when_the_recording_started_late(
    tmp_path: Path, capsys
) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    origin_shift = round(1.5 * RATE)  # the recording starts 0.5 s before the first trial
    pulses = [(s - origin_shift, e - origin_shift) for s, e in _pulses(ATTEMPTS)]
    recording, _ = make_recording(tmp_path / "late.jls", ATTEMPTS, pulses)
    line = _refused(run, recording, capsys)
    assert line == (
        f"h2iot: error: {recording}: the idle baseline (1 s before t1 started, 0.800 s before "
        "the recording) is not in the recording: start recording before the sweep, or give the "
        "idle power with --idle-mw"
    )
    assert main(["meter", "import", str(run), str(recording), "--idle-mw", "1000"]) == 0
    rows = _rows(run)
    window_s = float(rows[0]["window_s"])
    assert float(rows[0]["energy_above_idle_mj"]) == pytest.approx(
        float(rows[0]["energy_mj"]) - 1000.0 * window_s, abs=1e-5
    )
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["idle_baseline"] == {"mean_mw": 1000.0, "source": "--idle-mw"}


def test_nan_current_beside_a_voltage_is_counted_saturated_and_bridged(tmp_path: Path) -> None:
    """The instrument's own NaN in the current (the voltage measured): not a drop, which
    leaves every signal NaN (the test below), so counted in samples_saturated."""
    run = make_run(tmp_path / "run", ATTEMPTS[:2])
    pulses = _pulses(ATTEMPTS[:2])
    current, voltage = _waveforms(ATTEMPTS[:2], pulses)
    gap = np.arange(pulses[1][0] + 1000, pulses[1][0] + 1500)  # 500 samples left unmeasured

    def holed(indices: np.ndarray) -> np.ndarray:
        values = current(indices)
        return np.where(np.isin(indices, gap), np.nan, values)

    path = tmp_path / "dropped.jls"
    write_recording(path, pulses[-1][1] + RATE // 2, holed, voltage, pulses,
                    layout=Layout(signals=("current", "voltage", "gpi[0]")))  # fmt: skip
    import_recording(run, path, sweep_rules())
    rows = _rows(run)
    assert [(r["samples_lost"], r["samples_saturated"]) for r in rows] == [
        ("0", "0"),
        ("0", "500"),
    ]
    assert int(rows[1]["samples"]) == pulses[1][1] - pulses[1][0] + 1 - 500
    # The current was flat across the gap: bridging it loses nothing.
    assert float(rows[1]["energy_mj"]) == pytest.approx(
        expected_energy_mj(ATTEMPTS[:2], pulses[1]), rel=1e-4
    )


def test_a_pulse_spanning_a_drop_is_one_pulse_its_dropped_samples_lost(tmp_path: Path) -> None:
    """The driver's recorder writes a drop as a skip in the sample ids: GPI0 reads 0 there."""
    run = make_run(tmp_path / "run", ATTEMPTS)
    pulses = _pulses(ATTEMPTS)
    drop = (pulses[1][0] + 1000, pulses[1][0] + 1504)  # whole bytes of the bits
    recording, _ = make_recording(tmp_path / "sweep.jls", ATTEMPTS, drops=[drop])
    import_recording(run, recording, sweep_rules())
    rows = _rows(run)
    assert [r["samples_lost"] for r in rows] == ["0", "504", "0", "0"]
    assert [r["samples_saturated"] for r in rows] == ["0"] * 4
    meter = json.loads((run / "manifest.json").read_text())["meter"]
    assert (meter["pulses"], meter["drops"], meter["samples_dropped"]) == (4, 1, 504)
    assert float(rows[1]["window_s"]) == pytest.approx(ATTEMPTS[1].duration_s, abs=1e-6)
    assert int(rows[1]["samples"]) == pulses[1][1] - pulses[1][0] + 1 - 504
    # The current was flat across the drop: bridging it loses nothing.
    assert float(rows[1]["energy_mj"]) == pytest.approx(
        expected_energy_mj(ATTEMPTS, pulses[1]), rel=1e-4
    )


def test_a_drop_that_swallowed_a_pulse_is_named(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS)
    pulses = _pulses(ATTEMPTS)
    drop = (pulses[2][0] - 25_000, pulses[2][1] + 15_000)  # t3's pulse, low on both sides
    recording, _ = make_recording(tmp_path / "sweep.jls", ATTEMPTS, drops=[drop])
    line = _refused(run, recording, capsys)
    assert line == (
        f"h2iot: error: {recording}: pulse 3 (at 3.705000 s) does not match trial t3: lasts "
        "0.210000 s, the trial 0.080000 s (3 pulses in the recording, 4 trials in the run); "
        "the marker is unknown over samples 3200000..3319999 (0.120000 s at 3.200000 s), which "
        "the device dropped"
    )


def test_a_run_with_the_process_window_is_refused(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "run", ATTEMPTS, window="process")
    recording, _ = make_recording(tmp_path / "sweep.jls", ATTEMPTS)
    line = _refused(run, recording, capsys)
    assert line.startswith(f"h2iot: error: {run / 'manifest.json'}: energy_window 'process': ")


def test_what_is_not_a_run_or_a_recording_is_named(tmp_path: Path, capsys) -> None:
    assert main(["meter", "import", str(tmp_path), str(tmp_path / "x.jls")]) == 2
    assert capsys.readouterr().err == (
        f"h2iot: error: {tmp_path / 'manifest.json'}: no such file (not a run folder)\n"
    )
    run = make_run(tmp_path / "run", ATTEMPTS)
    line = _refused(run, tmp_path / "x.jls", capsys)
    assert line == f"h2iot: error: {tmp_path / 'x.jls'}: no such recording"


def test_memory_stays_bounded_by_the_chunk_not_the_recording(tmp_path: Path) -> None:
    """Three trials of 0.7 s at 1 MS/s (a 25 MB recording) read in 64 Ki-sample chunks."""
    attempts = [Attempt(f"t{n}", 0.7, gap_s=0.2, extra_a=0.1 * n) for n in (1, 2, 3)]
    run = make_run(tmp_path / "run", attempts)
    recording, pulses = make_recording(tmp_path / "long.jls", attempts,
                                       signals=("current", "voltage", "gpi[0]"))  # fmt: skip
    size = recording.stat().st_size
    chunk = 1 << 16
    assert size > 25 * chunk * 8  # the recording is many times a chunk's samples
    tracemalloc.start()
    try:
        result = import_recording(run, recording, sweep_rules(), ImportOptions(chunk_samples=chunk))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.trials) == 3
    # A chunk is 64 Ki samples: current, voltage and power in float64 are 1.5 MiB at once.
    assert peak < size / 8, f"peak {peak} B for a {size} B recording"
    for trial, pulse in zip(result.trials, pulses, strict=True):
        assert trial.energy_mj == pytest.approx(expected_energy_mj(attempts, pulse), rel=1e-12)
    assert math.isfinite(result.idle_mw)
