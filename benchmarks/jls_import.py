"""Joulescope recording import rate, measured (not a test): run `python benchmarks/jls_import.py`.

A recording of N seconds (default 20) at 1 MS/s in the Joulescope UI's layout is written by
pyjls's Writer (controller.meter.jls.synthetic), with a marker pulse for each of a run's
trials (0.3 s trials 0.3 s apart: half the recording is inside a trial), and imported into a
minimal run directory of those trials by `import_recording`, as `h2iot meter import` does:
the GPI0 scan over the whole recording, the idle baseline, each trial's energy at full rate
and its 1 kHz trace, trials.csv and the manifest rewritten.

Reported per layout: the recording's size, the import's CPU time (process time, best of
`--repeats`) and wall time, MB of recording per CPU second, how many times real time that is,
and the peak of Python-side allocations during one more import under tracemalloc (numpy's
arrays included; pyjls's own C buffers are not), against the file's size.

Layouts: `i v gpi0` (current, voltage, GPI0: the 8 MB/s of the issue); `ui all` (also power,
current range and GPI1-3, as the UI records with every signal on); `i v gpi0, counter % 8`
(the device's counter not a multiple of 8 at the first sample, which sends GPI through pyjls's
statistics instead of its packed bits: controller.meter.jls.recording says why).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from controller.cli.meter import sweep_rules
from controller.meter.jls.recording import pyjls
from controller.meter.jls.run import import_recording
from controller.meter.jls.synthetic import UI_SIGNALS, Layout, write_recording
from controller.run.recorder import RunRecorder

RATE = 1_000_000
TRIAL_S, GAP_S, LEAD_S = 0.3, 0.3, 2.0
T0 = 1_796_000_000_000_000_000

LAYOUTS = {
    "i v gpi0": Layout(signals=("current", "voltage", "gpi[0]")),
    "ui all": Layout(signals=UI_SIGNALS),
    "i v gpi0, counter % 8": Layout(
        signals=("current", "voltage", "gpi[0]"), first_sample_id=86_400_000_005
    ),
}


def schedule(seconds: float) -> list[tuple[int, int]]:
    """Trial pulses [start, end) in samples, from LEAD_S until 0.5 s before the end."""
    pulses, t = [], LEAD_S
    while t + TRIAL_S < seconds - 0.5:
        pulses.append((round(t * RATE), round((t + TRIAL_S) * RATE)))
        t += TRIAL_S + GAP_S
    return pulses


def make_run(run_dir: Path, pulses: list[tuple[int, int]]) -> None:
    manifest = {
        "axes": ["initial_window_size"],
        "workload": {"kind": "page", "columns": []},
        "config": {
            "run": {"idle_baseline_s": 1.0},
            "energy": {"window": "fetch", "idle_tolerance_mw": 5.0},
            "meter": {"rate_hz": 1000},
            "sweep": {"initial_window_size": [65535]},
        },
        "energy_window": "fetch",
        "idle_baseline_s": 1.0,
    }
    recorder = RunRecorder.create(run_dir, ("initial_window_size",), manifest)
    origin = T0 - round(LEAD_S * 1e9)
    events = []
    for n, (start, end) in enumerate(pulses, start=1):
        start_ns, end_ns = origin + start * 1000, origin + end * 1000  # 1 MS/s: a sample is 1 us
        recorder.append_trial(
            {
                "trial_id": f"t{n}",
                "attempt": 1,
                "status": "ok",
                "initial_window_size": 65535,
                "t_wall_start_ns": start_ns,
                "t_wall_end_ns": end_ns,
            }
        )
        events.append({"t_wall_ns": start_ns - 200_000_000, "event": "trial_started",
                       "trial_id": f"t{n}", "attempt": 1})  # fmt: skip
    recorder.close()
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def waveforms(pulses: list[tuple[int, int]]):  # noqa: ANN201
    starts = np.array([p[0] for p in pulses])
    ends = np.array([p[1] for p in pulses])
    rng = np.random.default_rng(1)

    def current(indices: NDArray[np.int64]) -> NDArray[np.float64]:
        which = np.searchsorted(starts, indices, side="right") - 1
        inside = (which >= 0) & (indices < ends[np.clip(which, 0, None)])
        return np.where(inside, 0.45, 0.24) + rng.normal(0, 0.002, len(indices))

    def voltage(indices: NDArray[np.int64]) -> NDArray[np.float64]:
        return 5.05 + rng.normal(0, 0.001, len(indices))

    return current, voltage


def one_import(work: Path, recording: Path, pulses: list[tuple[int, int]]) -> tuple[float, float]:
    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    make_run(run, pulses)
    wall, cpu = time.perf_counter(), time.process_time()
    result = import_recording(run, recording, sweep_rules())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert len(result.trials) == len(pulses)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0, help="of 1 MS/s recording")
    parser.add_argument("--repeats", type=int, default=5, help="imports per layout, best kept")
    args = parser.parse_args()
    pyjls()  # one line naming the extra when it is missing
    pulses = schedule(args.seconds)
    length = int(args.seconds * RATE)
    current, voltage = waveforms(pulses)
    print(
        f"{args.seconds:g} s at 1 MS/s, {len(pulses)} trials of {TRIAL_S:g} s; "
        f"CPU seconds best of {args.repeats}"
    )
    print(
        f"{'layout':>22} {'MB':>6} {'cpu s':>6} {'wall s':>6} {'MB/cpu s':>9} {'x real':>7} "
        f"{'peak MB':>8} {'peak/file':>9}"
    )
    with tempfile.TemporaryDirectory(prefix="h2iot-jls-bench-") as tmp:
        work = Path(tmp)
        for name, given in LAYOUTS.items():
            layout = Layout(**{**given.__dict__, "rate_hz": RATE})
            recording = write_recording(work / "r.jls", length, current, voltage, pulses,
                                        layout=layout)  # fmt: skip
            size = recording.stat().st_size
            os.sync()  # the recording's pages written back: no writeback inside the timing
            one_import(work, recording, pulses)  # warm: modules loaded, the file in page cache
            runs = [one_import(work, recording, pulses) for _ in range(args.repeats)]
            cpu = min(r[0] for r in runs)
            wall = min(r[1] for r in runs)
            tracemalloc.start()
            one_import(work, recording, pulses)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            mb = size / 1e6
            print(
                f"{name:>22} {mb:>6.0f} {cpu:>6.2f} {wall:>6.2f} {mb / cpu:>9.0f} "
                f"{args.seconds / cpu:>7.1f} {peak / 1e6:>8.1f} {peak / size:>9.3f}"
            )
            recording.unlink()


if __name__ == "__main__":
    main()
