"""Each trial checked against the modelled meters' ground truth (`analysis.truth`).

A virtual or simulated meter writes the exact power it modelled for every sample
(`meter-truth.csv`, data/README.md). Its model is linear in what the node did: a CPU-second of a
modelled core costs `(full - idle) / cores` mJ above idle (687.5 mJ for the Pi 3B model), a byte
on its network interface `network_nj_per_byte` nJ. So each trial's truth above idle, integrated
over the trial's own window, must equal the model applied to the node's own activity in that
window, measured independently of the meter's booking: the client agent's CPU time over the
fetch (`client_cpu_s`; for the "process" window the trial process's, `client_process_cpu_s`)
and the bytes on the client's interface in that window: for the fetch, between its two marker
edges as the virtual meter logged them (`meter-edges.csv`); for the process window, over the
process (`client_interface_bytes`); else the HTTP/2 bytes the agent received and sent. The
interface bytes are the network term's own input: they check when its traffic was booked.
`agreement` makes that table; a trial whose ratio strays beyond `TOLERANCE` means the meter
booked the node's work at the wrong moment (the defect this check was written for: a late-found
interpreter's start-up booked whole into the next trial) or that something else ran on the node.

The truth is taken over the same intervals as the model's activity. A modelled meter books
what its node did between two readings evenly over the samples in between, and on a busy
machine its readings come late, so an interval may reach across a window's end. A fetch
window's ends are marker edges, at which the meter takes a reading as it learns of them; a
process window's ends (its process started and reaped) are not told to the meter, but its node
does nothing outside them, so the truth goes over the whole booking intervals around them
(`booked_span`) and the model's activity lies inside them.

What the reference does not see: CPU the node spent in the window outside the client agent
(none on a quiet node); without interface counts, TCP/IP headers and acknowledgements (at a
256-byte window one frame per segment: about a quarter more bytes than HTTP/2 counts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.energy import window_energy_mj
from analysis.facts import emulated_core_fractions
from analysis.load import Run
from analysis.truth import Truth

TOLERANCE = 0.10
"""A trial's truth above idle may differ from the model applied to its activity by this much."""

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Model:
    """The modelled meter's model as the manifest records it (Pi 3B defaults for runs from
    before it was recorded, which had no network term)."""

    idle_mw: float = 1200.0
    full_mw: float = 3950.0
    cores: int = 4
    network_nj_per_byte: float = 0.0
    core_fraction: float = 1.0  # an emulated node's CPU quota: its CPU time counts 1 / this

    @classmethod
    def of(cls, run: Run) -> Model:
        meter = run.manifest.get("meter")
        given = meter.get("model") if isinstance(meter, Mapping) else None
        known: dict[str, Any] = dict(given) if isinstance(given, Mapping) else {}
        fraction = emulated_core_fractions(run).get("client", 1.0)
        return cls(
            idle_mw=float(known.get("idle_mw", cls.idle_mw)),
            full_mw=float(known.get("full_mw", cls.full_mw)),
            cores=int(known.get("cores", cls.cores)),
            network_nj_per_byte=float(known.get("network_nj_per_byte", 0.0)),
            core_fraction=fraction,
        )

    def energy_above_idle_mj(self, cpu_s: float, bytes_: float) -> float:
        per_cpu_s = (self.full_mw - self.idle_mw) / self.cores / self.core_fraction
        return per_cpu_s * cpu_s + self.network_nj_per_byte * bytes_ / 1e6


def truth_of(run: Run) -> FloatArray | None:
    """The client input's exact power per sample, for a run with one meter START and a
    ground-truth file; None otherwise (a real meter, or a resumed run, whose sample indices
    restart)."""
    meter = run.manifest.get("meter")
    if not isinstance(meter, Mapping) or not meter.get("ground_truth"):
        return None
    path = run.path / str(meter["ground_truth"])
    if not path.exists():
        return None
    truth = Truth.load(path)
    if truth.starts != 1:
        return None
    return truth.per_sample(int(meter.get("client_analog_input", 0)))


def agreement(run: Run) -> pd.DataFrame | None:
    """Per ok trial: its window, the truth above idle over it, the model applied to the
    client's own CPU time and bytes, and their ratio; None when the run has no usable truth."""
    truth = truth_of(run)
    if truth is None or run.ok.empty:
        return None
    rate = float(run.manifest["meter"]["sample_rate_hz"])
    model = Model.of(run)
    process = run.manifest.get("energy_window") == "process"
    cpu_column = "client_process_cpu_s" if process else "client_cpu_s"
    t_s = np.arange(len(truth)) / rate
    edges = None if process else _edge_bytes(run)
    rows = []
    for _, trial in run.ok.iterrows():
        start, length = float(trial["window_start_s"]), float(trial["window_s"])
        cpu = float(trial.get(cpu_column, math.nan))
        between = edges.get(round(start * rate)) if edges else None
        bytes_ = _bytes(trial) if between is None else between
        # A process window's ends are where its node's activity starts and stops: the truth
        # goes over the whole booking intervals around them, as the model's activity does.
        if process:
            first, end = booked_span(truth, round(start * rate), round((start + length) * rate))
            start, length = first / rate, (end - first) / rate
        try:
            energy, _samples = window_energy_mj(t_s, truth, start, start + length)
        except ValueError:
            energy = math.nan
        above = energy - model.idle_mw * length
        modelled = model.energy_above_idle_mj(cpu, bytes_)
        rows.append(
            {
                "trial_id": trial["trial_id"],
                **{axis: trial[axis] for axis in run.axes},
                "window_s": float(trial["window_s"]),
                "cpu_s": cpu,
                "bytes": bytes_,
                "truth_above_idle_mj": above,
                "model_mj": modelled,
                "ratio": above / modelled if modelled > 0 else math.nan,
            }
        )
    return pd.DataFrame(rows)


def booked_span(truth: FloatArray, first: int, end: int) -> tuple[int, int]:
    """[first, end] (sample indices) widened to the whole booking intervals around its ends.

    A modelled meter books what its node did between two of its readings evenly over the
    samples between them: it cannot know when in between the work was done. Its readings come
    every tick on an idle machine, but on a busy one its thread runs late, and an interval can
    reach far across a window's end (a trial process's start-up, booked half before the
    process started). A booking interval is a run of samples at one power; the span's ends
    move out to the first and the last sample of the runs they fall in (of a run cut short by
    an unknown sample, NaN, its known part)."""
    last = len(truth) - 1
    first, end = min(max(first, 0), last), min(max(end, 0), last)
    while first > 0 and truth[first - 1] == truth[first]:
        first -= 1
    while end < last and truth[end + 1] == truth[end]:
        end += 1
    return first, end


def _edge_bytes(run: Run) -> dict[int, float] | None:
    """Rising edge's sample index -> the client input's interface bytes between it and the
    next falling edge, from the virtual meter's edge log (None without one)."""
    meter = run.manifest.get("meter")
    name = meter.get("edges") if isinstance(meter, Mapping) else None
    path = run.path / str(name) if name else None
    if path is None or not path.exists():
        return None
    table = pd.read_csv(path)
    client = int(meter.get("client_analog_input", 0)) if isinstance(meter, Mapping) else 0
    table = table[(table["start"] == 1) & (table["analog_input"] == client)]
    found: dict[int, float] = {}
    rising: pd.Series | None = None
    for _, edge in table.sort_values("sample_index", kind="stable").iterrows():
        if edge["level"] == 1:
            rising = edge
        elif rising is not None:
            found[int(rising["sample_index"])] = float(
                edge["interface_bytes"] - rising["interface_bytes"]
            )
            rising = None
    return found


def _bytes(trial: pd.Series) -> float:
    """The bytes the network term saw: the client node's interface over the trial process
    where the run measured it (TCP/IP headers and acknowledgements included), else the HTTP/2
    bytes the agent counted (received and sent), which leave those out."""
    on_interface = trial.get("client_interface_bytes")
    if on_interface is not None and not pd.isna(on_interface):
        return float(on_interface)
    sent = trial.get("client_bytes_sent")
    received = trial.get("client_bytes_received")
    return sum(0.0 if v is None or pd.isna(v) else float(v) for v in (received, sent))


def outside(table: pd.DataFrame, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """The trials whose truth strays from the model by more than `tolerance`."""
    return table[~((table["ratio"] - 1).abs() <= tolerance)]
