"""Records a realistic run folder from a model of the study, through the controller's RunRecorder.

Until the sweep engine records real runs, the analysis tests build their input here: the study's
shape (response time a + b / window, +300 % at 4096 vs 65535; client CPU % flat at about 21 % up
to 4096 and 60 % at 65535, hence CPU time +42 %; client energy above idle settling near 120 mJ),
multiplicative noise, one outlier, a failed attempt that was retried, power traces and frame
counts. Deterministic for a seed. Another workload's run (`workload="api"`, ...) has the page's
shape in the common columns and that workload's own columns (analysis.trial_columns) filled
from them by unit: times a tenth of the response, rates per response second, counts 100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.trial_columns import workload_columns
from controller.run.recorder import RunRecorder

STUDY_WINDOWS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535)
IDLE_MW = 1200.0
PAGE_BYTES = 7_246_431
ACS712_STEP_UA = 5000 / 1024 / 185 * 1e6
ACS712_NOISE_UA = 21.0 / 6 / 185 * 1e6  # the datasheet's 21 mV peak-to-peak as 6 sigma


@dataclass(frozen=True)
class Model:
    """Response time = base_s + per_window_s_b / window; speed < 1 slows everything down."""

    base_s: float = 0.502
    per_window_s_b: float = 8218.0
    client_flat_pct: float = 21.3
    client_top_pct: float = 60.0
    server_flat_pct: float = 10.0
    server_top_pct: float = 26.0
    energy_settled_mj: float = 120.0
    energy_per_window_mj_b: float = 30000.0
    speed: float = 1.0
    noise: float = 0.05

    def response_s(self, window: int) -> float:
        return (self.base_s + self.per_window_s_b / window) / self.speed

    def cpu_pct(self, window: int, flat: float, top: float) -> float:
        if window <= 4096:
            return flat
        return flat + (top - flat) * (math.log2(window) - 12) / (math.log2(65535) - 12)


def _manifest(
    axes: dict[str, tuple[int, ...]],
    repetitions: int,
    confidence: float,
    rate_hz: int,
    link_rate_mbit: float | None,
    rtt_s: float | None,
    name: str,
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "axes": list(axes),
        "created_wall_ns": 1_795_976_747_824_612_307,
        "config": {
            "run": {
                "name": name,
                "seed": 1,
                "repetitions": repetitions,
                "confidence": confidence,
                "order": "randomized-blocked",
                "idle_baseline_s": 5.0,
                "retries": 2,
                "trial_timeout_s": 120.0,
            },
            "sweep": {axis: list(values) for axis, values in axes.items()},
            "workload": {
                "site_seed": 0,
                "total_bytes": 7_000_000,
                "connection_window": None,
                "window_update_policy": "half",
            },
            "nodes": {
                "client": {"host": "local", "cpu": 0},
                "server": {"host": "local", "cpu": 1, "http_port": 8443},
            },
            "meter": {"source": "virtual", "rate_hz": rate_hz, "sensor": "5A", "supply_v": 5.0},
            "link": {"rate_mbit": link_rate_mbit, "loss_pct": 0.0, "delay_ms": 0.0},
        },
        "software": {"h2iot": "0.1.0", "python": "3.11.2", "engine": "h2"},
        "idle_power_mw": IDLE_MW,
        # What a virtual meter's tap records of itself (controller/meter/resolution.py): an
        # ACS712-5A on a 10-bit ADC at 5 V, one code 5000 / 1024 mV over 185 mV/A; its noise,
        # full scale and timing as controller/meter_sources/board/resolution.py states them.
        "meter": {
            "source": "virtual",
            "sample_rate_hz": rate_hz,
            "resolution": {
                "current_ua": ACS712_STEP_UA,
                "power_mw": ACS712_STEP_UA * 5.0 / 1000,
                "supply_v": 5.0,
                "basis": "ACS712-5A on A0: 10-bit ADC step 4.883 mV / 185 mV/A",
                "sample_rate_hz": float(rate_hz),
                "noise_ua": ACS712_NOISE_UA,
                "noise_mw": ACS712_NOISE_UA * 5.0 / 1000,
                "noise_basis": "Allegro ACS712 datasheet: 21 mV peak-to-peak typical output "
                "noise, taken as 6 sigma",
                "full_scale_ua": 5e6,
                "full_scale_mw": 25_000.0,
                "voltage": "assumed",
                "conversion_us": 104.0,
                "bandwidth_hz": 80e3,
            },
        },
    }
    if rtt_s is not None:
        manifest["rtt_s"] = rtt_s
    return manifest


def record_run(
    run_dir: Path,
    *,
    windows: tuple[int, ...] = STUDY_WINDOWS,
    extra_axis: tuple[str, tuple[Any, ...]] | None = None,
    repetitions: int = 5,
    seed: int = 0,
    model: Model | None = None,
    confidence: float = 0.90,
    rate_hz: int = 250,
    link_rate_mbit: float | None = None,
    rtt_s: float | None = None,
    power: bool = True,
    name: str = "fake-study",
    device: dict[str, Any] | None = None,
    workload: str = "page",
    workload_params: dict[str, Any] | None = None,
    meter_resolution: dict[str, Any] | None = None,
    phases: bool = False,
) -> Path:
    """`meter_resolution`: the manifest's `meter.resolution` record in place of the ACS712's;
    `phases`: fill the window's phase columns (`phase_row`), as a run from the agent does."""
    model = model or Model()
    rng = np.random.default_rng(seed)
    axes: dict[str, tuple[int, ...]] = {"initial_window_size": windows}
    if extra_axis is not None:
        axes[extra_axis[0]] = extra_axis[1]
    names = tuple(axes)
    manifest = _manifest(axes, repetitions, confidence, rate_hz, link_rate_mbit, rtt_s, name)
    if device is not None:
        manifest["device"] = device
    if meter_resolution is not None:
        manifest["meter"]["resolution"] = meter_resolution
    own = workload_columns(workload) if workload != "page" else ()
    if own:
        manifest["workload"] = {"kind": workload, "columns": [c.described() for c in own]}
        manifest["config"]["workload"] = {"kind": workload, **(workload_params or {})}
    recorder = RunRecorder.create(run_dir, names, manifest, workload)
    recorder.event("sweep_started", points=len(windows), repetitions=repetitions)
    grid = [(w, e) for w in windows for e in (extra_axis[1] if extra_axis is not None else (None,))]
    order = 0
    trial = 0
    for repetition in range(1, repetitions + 1):
        for index in rng.permutation(len(grid)):
            window, extra = grid[int(index)]
            trial += 1
            trial_id = f"t{trial:04d}"
            attempt = 1
            if trial == 3:  # one failed attempt, retried: it must not count as a result
                recorder.append_trial(
                    {
                        "trial_id": trial_id,
                        "attempt": 1,
                        "status": "failed",
                        "error": "body of /img/photo-2.jpg does not match the manifest",
                        "order_index": order,
                        "block": repetition,
                        "repetition": repetition,
                        "initial_window_size": window,
                        **({extra_axis[0]: extra} if extra_axis is not None else {}),
                    }
                )
                recorder.event("trial_failed", trial_id=trial_id)
                attempt = 2
            row, trace = _trial(model, rng, window, rate_hz, outlier=trial == 7)
            row |= {
                "trial_id": trial_id,
                "attempt": attempt,
                "status": "ok",
                "error": "",
                "order_index": order,
                "block": repetition,
                "repetition": repetition,
                "initial_window_size": window,
            }
            if extra_axis is not None:
                row[extra_axis[0]] = extra
            row |= {c.name: _own_value(c.name, c.unit, row) for c in own}
            if phases:
                row |= phase_row(row, trial)
            recorder.append_trial(row)
            if power:
                recorder.save_power(trial_id, trace[:, 0], trace[:, 1])
            order += 1
    recorder.event("sweep_finished")
    recorder.close()
    return run_dir


def _trial(
    model: Model, rng: np.random.Generator, window: int, rate_hz: int, outlier: bool
) -> tuple[dict[str, object], np.ndarray]:
    def noisy(value: float) -> float:
        return float(value * rng.lognormal(0.0, model.noise))

    response = noisy(model.response_s(window)) * (1.5 if outlier else 1.0)
    client_pct = noisy(model.cpu_pct(window, model.client_flat_pct, model.client_top_pct))
    serve = max(response - 0.003, 0.001)
    server_pct = noisy(model.cpu_pct(window, model.server_flat_pct, model.server_top_pct))
    above_idle = noisy(model.energy_settled_mj + model.energy_per_window_mj_b / window)
    window_s = response + 0.004
    energy = above_idle + IDLE_MW * window_s
    t_s = np.arange(0.0, window_s, 1.0 / rate_hz)
    ramp = np.minimum(1.0, t_s / 0.05)  # the fetch starts the CPU within a few tens of ms
    level = above_idle / window_s
    power_mw = IDLE_MW + level * ramp + rng.normal(0.0, 40.0, t_s.size)
    frames = PAGE_BYTES / min(window, 16384)
    updates = 2 * PAGE_BYTES / max(window // 2, 1)  # stream and connection windows, half policy
    row: dict[str, object] = {
        "t_wall_start_ns": 1_795_976_747_824_612_307,
        "t_wall_end_ns": 1_795_976_747_824_612_307 + int(response * 1e9),
        "client_response_s": response,
        "client_ttfb_s": noisy(0.0021),
        "client_cpu_s": response * client_pct / 100,
        "client_cpu_pct": client_pct,
        "client_rss_peak_bytes": int(noisy(30 * 2**20)),
        "client_bytes_received": PAGE_BYTES,
        "client_data_frames": round(frames),
        "client_window_update_frames": round(updates),
        "server_serve_s": serve,
        "server_cpu_s": serve * server_pct / 100,
        "server_cpu_pct": server_pct,
        "server_rss_peak_bytes": int(noisy(37 * 2**20)),
        "server_bytes_sent": PAGE_BYTES,
        "server_data_frames": round(frames),
        "energy_mj": energy,
        "energy_above_idle_mj": above_idle,
        "mean_power_mw": energy / window_s,
        "window_s": window_s,
        "window_source": "marker",
        "samples": t_s.size,
        "samples_lost": 0,
        "meter_crc_errors": 0,
        "meter_frame_gaps": 0,
    }
    return row, np.column_stack((t_s, power_mw))


CONNECT_S = 0.012
CLOSE_S = 0.004
CONNECT_SHARE = 0.03  # of the energy above idle
CLOSE_SHARE = 0.005


def phase_row(row: dict[str, Any], trial: int) -> dict[str, Any]:
    """The phase columns of a trial: connect and close of fixed lengths and shares of the
    energy above idle, exchange the rest, so the phases sum to the window and its energy as the
    controller's do; every fourth trial placed by the clock offset, the others by the marker."""
    window_s, above_idle = float(row["window_s"]), float(row["energy_above_idle_mj"])
    spans = {"connect": CONNECT_S, "close": CLOSE_S}
    spans["exchange"] = window_s - CONNECT_S - CLOSE_S
    above = {"connect": CONNECT_SHARE * above_idle, "close": CLOSE_SHARE * above_idle}
    above["exchange"] = above_idle - above["connect"] - above["close"]
    return {
        "phase_clock": "clock_offset" if trial % 4 == 0 else "marker",
        **{f"phase_{p}_s": spans[p] for p in spans},
        **{f"energy_{p}_mj": above[p] + IDLE_MW * spans[p] for p in spans},
        **{f"energy_{p}_above_idle_mj": above[p] for p in spans},
    }


def _own_value(name: str, unit: str, row: dict[str, Any]) -> float:
    """A workload column's value from the trial's common ones, by its unit."""
    response = float(row["client_response_s"])
    if unit == "s":
        return response / 10
    if unit in ("1/s", "Hz"):
        return 100 / response
    if unit == "B":
        return PAGE_BYTES / 10
    if unit == "%":
        return float(row["client_cpu_pct"])
    if name.endswith("_kbps"):
        return PAGE_BYTES / response / 1000
    return 0 if name.endswith(("_errors", "_dropped", "_lost", "_repeated")) else 100
