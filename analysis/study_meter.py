"""The reference study's meter, replayed on a trial's power trace: what its Arduino sketch and
its way of turning readings into energy would have reported for the trial
(`energy_study_meter_mj`).

The sketch is niclabs/h2tests `Diego Londoño/Medicion_corriente.ino` (added in de1cd5f,
2019-03-28, "uploading files"; the folder was removed in 83ea1fc, 2019-04-23). Its loop:

1. `getCorriente(100)`: 100 consecutive `analogRead(A0)`; each code becomes a voltage as
   code x 5.0 / 1023.0, then a current as (voltage - 2.5) / 0.185 (an ACS712-5A, 185 mV/A, its
   zero taken as exactly 2.5 V); the 100 currents are averaged;
2. the average times 0.707 ("currentRMS": a sine's RMS factor, applied to a DC current);
3. power = 5 x that, in W (the supply taken as exactly 5 V);
4. `Serial.print` of a counter, ", ", the power with 3 decimals, and a line end, at 9600 baud;
5. `delay(500)`.

The same folder's `Cómo obtener Datos.docx` (how the data were taken) and `client.py` (the
fetch loop: `nghttp` run for i in range(1, 68), i.e. 67 fetches, one process each) do not say
how the printed powers became a process's work, and the repository has no script that does
(its `scripts/consumption.awk`, for the IoT-LAB nodes' OML power data, averages the readings
whose time falls in [start, end]). The study's text says power was integrated over each
process's duration. The replay takes that as: the mean of the readings taken during the
process, times the process's duration; the trial's window (`window_s`) is the process.

What the replay models, and from where:
- the ADC: ATmega2560 datasheet, "ADC Conversion Result": code = floor(V_in x 1024 / V_ref),
  0..1023, V_ref = the board's 5 V (assumed exact, as the sketch does). The sketch divides by
  1023, not 1024: a code reads 1/1023 high, and at the zero (code 512) that is +13 mA;
- the sensor: V_out = 2.5 V + 0.185 V/A x I, I = the trace's power / the trial's supply;
- a read's duration: 112 us. A conversion is 13 ADC clocks at 16 MHz / 128 (the prescaler the
  Arduino core sets), 104 us, plus `analogRead`'s own work; the Arduino reference gives "about
  100 microseconds". The sketch's float arithmetic between reads (two float divisions per read
  on an 8-bit core) lengthens a burst by an amount not measured here: it changes only how much
  of the trace one burst averages, not the level it reads;
- the print: the line ("1234, 1.234" and CR LF, 13 bytes, 13.5 ms at 9600 baud 8N1) goes into
  the core's 64-byte transmit buffer (ArduinoCore-avr `HardwareSerial.h`, SERIAL_TX_BUFFER_SIZE
  on boards with more than 1 KiB of RAM) and is sent during the delay, so the loop waits only
  for what does not fit: nothing. A reading every 100 x 112 us + 500 ms = 511.2 ms;
- the printed value: `Print::printFloat` rounds half away from zero at 3 decimals (1 mW).

Not modelled: the ACS712's own noise (the trace's noise is the only dither, so a noiseless
trace sees the ADC's full step; the sketch's mean of 100 reads of a noisy signal resolves
finer), V_ref or the sensor's zero off their nominal values, and float32 rounding.

The phase of the bursts relative to the trial is unknown, so the replay is the mean over
`phases` evenly spaced phases of the first burst (its middle in [0, min(period, window))):
a window shorter than the period holds one reading in only some phases, and the replay is the
expectation over the phases that give it one (what a neighbouring reading outside the window
would have read is not in the trace). A burst near an edge reads the trace's end values for
its reads outside the trace.

Pure numpy; `replay_run` is the thin reader over a run's power traces.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.load import Run, load_power
from analysis.manifest import config_value
from analysis.points import summarize_points

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ENERGY_STUDY_METER = "energy_study_meter_mj"
READINGS = "study_meter_readings"
"""Readings the sketch takes in a trial's window, over all phases: window / period. Below 1,
the study's pipeline had a reading for the process in only that share of its runs."""
MIN_TRACE_RATE_HZ = 1000.0
"""Below this a 11.2 ms burst spans fewer than about 11 of the trace's samples, and the
replay would be reading the trace's sampling, not the sketch's."""
DEFAULT_PHASES = 16


@dataclass(frozen=True)
class StudySketch:
    """Medicion_corriente.ino's constants and the board's (module doc for each source)."""

    sensitivity_v_per_a: float = 0.185
    zero_v: float = 2.5
    adc_ref_v: float = 5.0
    adc_steps: int = 1024  # the ADC's transfer divides by 1024 ...
    sketch_divisor: float = 1023.0  # ... the sketch's conversion by 1023
    reads_per_reading: int = 100
    read_s: float = 112e-6
    rms_factor: float = 0.707
    assumed_supply_v: float = 5.0
    print_decimals: int = 3
    line_bytes: int = 13  # "1234, 1.234\r\n"
    tx_buffer_bytes: int = 64
    baud: int = 9600
    delay_s: float = 0.5

    @property
    def burst_s(self) -> float:
        return self.reads_per_reading * self.read_s

    @property
    def print_wait_s(self) -> float:
        """What the loop waits on the print: the bytes that do not fit the transmit buffer,
        10 bits each (8N1)."""
        return max(0, self.line_bytes - self.tx_buffer_bytes) * 10 / self.baud

    @property
    def period_s(self) -> float:
        return self.burst_s + self.print_wait_s + self.delay_s


SKETCH = StudySketch()


@dataclass(frozen=True)
class Replay:
    """One trial through the study's meter: the expectation over phases (`energy_mj`), the
    lowest and highest phase, the readings a phase took (mean; at least one by the phase
    rule), and how many phases were averaged."""

    energy_mj: float
    low_mj: float
    high_mj: float
    readings: float
    phases: int


def adc_codes(power_mw: FloatArray, supply_v: float, sketch: StudySketch = SKETCH) -> IntArray:
    """The codes `analogRead` returns for the sensor's output at these powers."""
    current_a = np.asarray(power_mw, dtype=np.float64) / 1000.0 / supply_v
    volts = sketch.zero_v + sketch.sensitivity_v_per_a * current_a
    codes = np.floor(volts * sketch.adc_steps / sketch.adc_ref_v)
    return np.clip(codes, 0, sketch.adc_steps - 1).astype(np.int64)


def printed_w(codes: IntArray, sketch: StudySketch = SKETCH) -> FloatArray:
    """The power the sketch prints, in W, for each row of `reads_per_reading` codes."""
    volts = np.asarray(codes, dtype=np.float64) * sketch.adc_ref_v / sketch.sketch_divisor
    current_a = ((volts - sketch.zero_v) / sketch.sensitivity_v_per_a).mean(axis=-1)
    watts = sketch.assumed_supply_v * sketch.rms_factor * current_a
    scale = 10.0**sketch.print_decimals
    rounded = np.sign(watts) * np.floor(np.abs(watts) * scale + 0.5) / scale
    return np.asarray(rounded, dtype=np.float64)


def trace_rate_hz(t_s: FloatArray) -> float:
    """The trace's sample rate from its median spacing; 0 for fewer than 2 samples."""
    if len(t_s) < 2:
        return 0.0
    spacing = float(np.median(np.diff(t_s)))
    return 1.0 / spacing if spacing > 0 else 0.0


def replayable(rate_hz: float) -> bool:
    # A 1 kHz trace's median spacing can come out a hair above 1 ms in floating point.
    return rate_hz >= MIN_TRACE_RATE_HZ * (1 - 1e-6)


def replay(
    t_s: FloatArray,
    power_mw: FloatArray,
    window_s: float,
    supply_v: float,
    *,
    sketch: StudySketch = SKETCH,
    phases: int = DEFAULT_PHASES,
) -> Replay:
    """What the study's meter and pipeline report for a trial whose window is [0, window_s]
    on the trace's timebase (module doc). NaN energies for an empty window or trace."""
    if window_s <= 0 or len(t_s) == 0 or phases < 1:
        return Replay(math.nan, math.nan, math.nan, 0.0, 0)
    period = sketch.period_s
    first = (np.arange(phases) + 0.5) / phases * min(period, window_s)
    per_phase = math.ceil(window_s / period) + 1
    middles = first[:, None] + period * np.arange(per_phase)[None, :]
    inside = middles < window_s
    phase_of = np.broadcast_to(np.arange(phases)[:, None], middles.shape)[inside]
    offsets = (np.arange(sketch.reads_per_reading) + 0.5) * sketch.read_s - sketch.burst_s / 2
    reads = middles[inside][:, None] + offsets[None, :]
    # np.interp holds the trace's end values beyond its ends (the module doc's edge rule).
    codes = adc_codes(np.interp(reads, t_s, power_mw), supply_v, sketch)
    readings = printed_w(codes, sketch)
    count = np.bincount(phase_of, minlength=phases)
    mean_w = np.bincount(phase_of, weights=readings, minlength=phases) / count
    energy_mj = mean_w * window_s * 1000.0
    return Replay(
        float(energy_mj.mean()),
        float(energy_mj.min()),
        float(energy_mj.max()),
        float(count.mean()),
        phases,
    )


@dataclass(frozen=True)
class Replayed:
    """A run's replay: `rows` are summary rows (analysis.points) of energy_study_meter_mj and
    study_meter_readings per point; `unavailable` says why there are none ("" when there
    are)."""

    rows: pd.DataFrame
    unavailable: str = ""


def supply_v_of(manifest: Mapping[str, Any]) -> float:
    """The trial's supply: the meter's recorded resolution's, else the config's, else the
    study's 5 V."""
    meter = manifest.get("meter")
    resolution = meter.get("resolution") if isinstance(meter, Mapping) else None
    for value in (
        resolution.get("supply_v") if isinstance(resolution, Mapping) else None,
        config_value(manifest, "meter.supply_v"),
    ):
        if isinstance(value, int | float) and value > 0:
            return float(value)
    return SKETCH.assumed_supply_v


def replay_run(run: Run, sketch: StudySketch = SKETCH, phases: int = DEFAULT_PHASES) -> Replayed:
    """energy_study_meter_mj (and study_meter_readings) for each ok trial with a trace at
    MIN_TRACE_RATE_HZ or more and a window_s, summarised per point like every other metric."""
    supply = supply_v_of(run.manifest)
    table = run.ok.copy()
    values: list[float] = []
    rates: list[float] = []
    for _, row in table.iterrows():
        trace = load_power(run, str(row["trial_id"]))
        window = float(row["window_s"]) if "window_s" in row else math.nan
        if trace is None or not math.isfinite(window):
            values.append(math.nan)
            continue
        rate = trace_rate_hz(trace[:, 0])
        rates.append(rate)
        values.append(
            replay(trace[:, 0], trace[:, 1], window, supply, sketch=sketch, phases=phases).energy_mj
            if replayable(rate)
            else math.nan
        )
    if not rates:
        return Replayed(pd.DataFrame(), "not replayable: no power traces with a window")
    table[ENERGY_STUDY_METER] = values
    table[READINGS] = table["window_s"].where(table[ENERGY_STUDY_METER].notna()) / sketch.period_s
    if table[ENERGY_STUDY_METER].isna().all():
        return Replayed(
            pd.DataFrame(), f"not replayable: trace at {float(np.median(rates)):.4g} Hz"
        )
    workload = dict(run.manifest.get("workload") or {})
    workload["columns"] = [{"name": ENERGY_STUDY_METER}, {"name": READINGS}]
    derived = replace(run, ok=table, manifest={**run.manifest, "workload": workload})
    summary = summarize_points(derived)
    rows = summary[summary["metric"].isin((ENERGY_STUDY_METER, READINGS))]
    return Replayed(rows.reset_index(drop=True))
