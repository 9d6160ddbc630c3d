"""A Joulescope recording imported into a recorded run: each trial's trace and energy written
as a live meter writes them, so the report reads the run as any other.

What it writes, for each ok trial whose marker pulse it found:
- `power/<trial>.npy`, the trace as the sweep engine saves it (`RunRecorder.save_power`: seconds
  from the window's start, mW), the recording's samples averaged into bins at the run's
  `meter.rate_hz` as the PPK2's live store keeps them, two bins beyond each edge;
- the row's meter columns (energy, energy above idle, mean power, window, samples, samples
  lost, window source `marker`) as `controller.sweep.rows.trial_row` fills them (`SweepRules`),
  the energy integrated over the full-rate samples of the pulse (`windows`);
- the manifest's `meter` (the Joulescope, its rate, the recording) and `idle_baseline` (the
  idle power in the recording over the `run.idle_baseline_s` seconds before the first trial's
  `trial_started` event, mapped onto the recording through that trial's pulse, judged by the
  sweep's own rule, `SweepRules`), the previous ones kept under `meter_import.replaced`. The
  baseline after the sweep is placed in the recording by no event, so `idle_baseline_end`
  moves there too.

Everything is read and checked before anything is written: a recording that does not match
(`pulses.match_pulses`), or a run that already has energy without `replace`, leaves the run as
it was. The traces are written first, then trials.csv whole through a rename, then the manifest.
trials.csv is append-only while a sweep records; an import is the one later change to its rows,
and only to the meter's columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from analysis.columns import TRIALS
from analysis.errors import RunFormatError
from analysis.load import read_events
from analysis.manifest import config_value, read_manifest
from controller.energy import WindowEnergy
from controller.errors import ConfigError
from controller.meter.jls.pulses import (
    Expected,
    Matched,
    MatchError,
    Pulse,
    ScanState,
    Tolerance,
    match_pulses,
    scan_bits,
)
from controller.meter.jls.recording import CHUNK_SAMPLES, Recording, pyjls
from controller.meter.jls.resolution import joulescope
from controller.meter.jls.windows import EnergyFold, bin_means, fold_power, window_total
from controller.meter.jls.write import TrialTrace, write_import
from controller.run.recorder import read_trials

F64 = npt.NDArray[np.float64]

SOURCE = "joulescope"
DEFAULT_TRACE_RATE_HZ = 1000
DEFAULT_SUPPLY_V = 5.0  # the config's own default (meter.supply_v)
_PAD_BINS = 2  # bins kept beyond each edge of a window, as the PPK2's live tap keeps them
_MAX_ANNOTATIONS = 200  # recorded in the manifest; a recording may hold thousands


@dataclass(frozen=True)
class TrialWindow:
    """A trial's samples as a live meter's window gives them (`PowerWindow`'s fields): on the
    recording's timebase, the trace binned, the window cut by the marker's pulse."""

    t_s: F64
    power_mw: F64
    start_s: float
    end_s: float
    samples_lost: int
    source: Literal["marker"] = "marker"
    crc_errors: int = 0
    frame_gaps: int = 0
    samples_saturated: int = 0  # NaN current the instrument wrote (windows.py)


class IdleVerdict(Protocol):
    @property
    def mean_mw(self) -> float: ...

    def facts(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SweepRules:
    """What the sweep decides and an import must decide the same way: the idle baseline's rule
    (`controller.sweep.baseline.judge`) and the meter's cells of a trial's row
    (`controller.sweep.rows.trial_row`). The caller gives them: controller.meter sits below
    controller.sweep (DESIGN.md's dependency rule), so it cannot import them itself."""

    judge_idle: Callable[[F64, F64, float], IdleVerdict]
    meter_cells: Callable[[TrialWindow, WindowEnergy], Mapping[str, object]]


@dataclass(frozen=True)
class ImportOptions:
    replace: bool = False  # overwrite energy the run already has (another meter's)
    idle_mw: float | None = None  # the idle power to subtract, instead of the recording's
    tolerance: Tolerance = field(default_factory=Tolerance)
    marker: str = "gpi[0]"
    chunk_samples: int = CHUNK_SAMPLES
    trace_rate_hz: int | None = None  # default: the run's meter.rate_hz


@dataclass(frozen=True)
class ImportedTrial:
    trial_id: str
    pulse: int  # its pulse's place in the recording, from 1
    energy_mj: float
    window_s: float
    samples_lost: int


@dataclass(frozen=True)
class ImportResult:
    run_dir: Path
    recording: Path
    rate_hz: int
    pulses: int
    trials: tuple[ImportedTrial, ...]
    replaced: int  # trials whose earlier energy was overwritten
    idle_mw: float
    idle_source: str  # "recording" or "--idle-mw"
    instrument: str


@dataclass(frozen=True)
class _Trace:
    row_index: int
    trial_id: str
    pulse: int
    power: TrialWindow
    energy: WindowEnergy


def import_recording(
    run_dir: Path,
    recording_path: Path,
    rules: SweepRules,
    options: ImportOptions = ImportOptions(),
) -> ImportResult:
    """Match the recording's pulses to the run's trials and write their energy (module doc);
    ConfigError, one line naming the file and the pulse or trial at fault, leaving the run as
    it was."""
    pyjls()  # a missing pyjls is the first thing to hear about, before the run's own faults
    try:
        manifest = read_manifest(run_dir)
    except RunFormatError as exc:
        raise ConfigError(str(exc)) from None
    window = manifest.get("energy_window") or config_value(manifest, "energy.window") or "fetch"
    if window != "fetch":
        raise ConfigError(
            f"{run_dir / 'manifest.json'}: energy_window {window!r}: an import cuts the fetch "
            "window by the marker's pulses; the trial process around it has no edges to cut by"
        )
    rows = _rows(run_dir)
    expected, row_indices = _expected(rows)
    if not expected:
        raise ConfigError(f"{run_dir / TRIALS}: no trial with a client record to match pulses to")
    had = [r["trial_id"] for r in rows if r["status"] == "ok" and r.get("energy_mj")]
    if had and not options.replace:
        meter = manifest.get("meter", {})
        by = meter.get("source") if isinstance(meter, Mapping) else None
        raise ConfigError(
            f"{run_dir / TRIALS}: {len(had)} trials already have energy (meter {by or 'unknown'}"
            f", first {had[0]}): --replace to overwrite them with the recording's"
        )
    with Recording.open(recording_path) as recording:
        rate = recording.rate_hz
        pulses, state = _scan(recording, options)
        try:
            matched = match_pulses(pulses, expected, rate, options.tolerance)
        except MatchError as exc:
            raise ConfigError(f"{recording_path}: {exc}{_hint(state, rate, exc)}") from None
        bin_samples = _bin_samples(manifest, rate, options)
        idle_mw, idle_facts = _idle(
            recording,
            manifest,
            run_dir=run_dir,
            first=matched[0],
            bin_samples=bin_samples,
            options=options,
            judge_idle=rules.judge_idle,
        )
        traces = [
            _trace(
                recording,
                m,
                row_index=row_indices[m.number - 1],
                bin_samples=bin_samples,
                idle_mw=idle_mw,
                options=options,
            )
            for m in matched
            if rows[row_indices[m.number - 1]]["status"] == "ok"
        ]
        meter = _meter_facts(
            recording,
            state,
            pulses=len(pulses),
            bin_samples=bin_samples,
            options=options,
            manifest=manifest,
        )
    write_import(
        run_dir,
        manifest,
        rows=rows,
        traces=[
            TrialTrace(t.trial_id, t.power.t_s - t.power.start_s, t.power.power_mw) for t in traces
        ],
        cells={t.row_index: rules.meter_cells(t.power, t.energy) for t in traces},
        meter=meter,
        idle_mw=idle_mw,
        idle_facts=idle_facts,
        recording_path=recording_path,
    )
    return ImportResult(
        run_dir=run_dir,
        recording=recording_path,
        rate_hz=rate,
        pulses=len(pulses),
        trials=tuple(
            ImportedTrial(
                t.trial_id, t.pulse, t.energy.energy_mj, t.energy.duration_s, t.power.samples_lost
            )
            for t in traces
        ),
        replaced=len(had),
        idle_mw=idle_mw,
        idle_source=str(idle_facts["source"]),
        instrument=f"{meter['instrument']['model']} {meter['instrument']['serial_number']}".strip(),
    )


def _expected(rows: Sequence[Mapping[str, str]]) -> tuple[list[Expected], list[int]]:
    """The attempts that ran their client, in the order they ran (trials.csv's), and each
    one's row index."""
    expected: list[Expected] = []
    row_indices: list[int] = []
    for index, row in enumerate(rows):
        start, end = row.get("t_wall_start_ns"), row.get("t_wall_end_ns")
        if not start or not end:
            continue  # the client never ran (its node was lost): no marker pulse either
        attempt = int(row.get("attempt") or 1)
        expected.append(Expected(row["trial_id"], attempt, int(start), int(end)))
        row_indices.append(index)
    return expected, row_indices


def _rows(run_dir: Path) -> list[dict[str, str]]:
    """trials.csv's rows, less a torn last line (a sweep killed mid-write), which the rewrite
    must not complete: the recorder cuts it off as a resumed sweep does."""
    rows = read_trials(run_dir)
    path = run_dir / TRIALS
    if rows and path.exists():
        with path.open("rb") as handle:
            handle.seek(-1, 2)
            if handle.read(1) != b"\n":
                rows = rows[:-1]
    return rows


def _scan(recording: Recording, options: ImportOptions) -> tuple[list[Pulse], ScanState]:
    state = ScanState()
    pulses: list[Pulse] = []
    for first, bits in recording.bit_chunks(options.marker, options.chunk_samples):
        state, found = scan_bits(state, bits, first, recording.dropped(first, len(bits)))
        pulses.extend(found)
    return pulses, state


def _hint(state: ScanState, rate_hz: int, mismatch: MatchError) -> str:
    """What the scan saw beyond whole pulses, which may explain a mismatch."""
    notes = []
    drops = state.drops_within(mismatch.first_index, mismatch.end_index)
    if drops:
        more = f" and {len(drops) - 1} more drops near it" if len(drops) > 1 else ""
        notes.append(
            f"the marker is unknown over {drops[0].describe(rate_hz)}, which the device "
            f"dropped{more}"
        )
    if state.high_at_start:
        notes.append("the marker was already high when the recording started")
    if state.rise_index is not None:
        notes.append(f"a pulse rising at {state.rise_index / rate_hz:.6f} s never fell")
    return f"; {', '.join(notes)}" if notes else ""


def _bin_samples(manifest: Mapping[str, Any], rate_hz: int, options: ImportOptions) -> int:
    configured = config_value(manifest, "meter.rate_hz")
    trace_rate = options.trace_rate_hz or (
        int(configured) if isinstance(configured, int | float) and configured > 0 else None
    )
    return max(1, rate_hz // (trace_rate or DEFAULT_TRACE_RATE_HZ))


def _binned(
    recording: Recording, first: int, end: int, bin_samples: int, options: ImportOptions
) -> tuple[F64, F64]:
    """(bin centres in recording indices, mean mW) over [first, end), read in chunks."""
    chunk = max(bin_samples, options.chunk_samples - options.chunk_samples % bin_samples)
    first -= first % bin_samples
    at: list[F64] = []
    means: list[F64] = []
    for index, power in recording.power_chunks(first, end, chunk):
        centres, mean = bin_means(power, index, bin_samples)
        at.append(centres)
        means.append(mean)
    if not at:
        return np.empty(0), np.empty(0)
    return np.concatenate(at), np.concatenate(means)


def _idle(
    recording: Recording,
    manifest: Mapping[str, Any],
    *,
    run_dir: Path,
    first: Matched,
    bin_samples: int,
    options: ImportOptions,
    judge_idle: Callable[[F64, F64, float], IdleVerdict],
) -> tuple[float, dict[str, Any]]:
    """The idle power to subtract, and the manifest's facts about it (module doc)."""
    if options.idle_mw is not None:
        return options.idle_mw, {"mean_mw": options.idle_mw, "source": "--idle-mw"}
    rate = recording.rate_hz
    seconds = float(
        manifest.get("idle_baseline_s") or config_value(manifest, "run.idle_baseline_s")
    )
    trial = first.expected
    started = next(
        (
            int(e["t_wall_ns"])
            for e in read_events(run_dir)
            if e.get("event") == "trial_started"
            and e.get("trial_id") == trial.trial_id
            and int(e.get("attempt", 1)) == trial.attempt
        ),
        None,
    )
    give = "give the idle power with --idle-mw"
    if started is None:
        raise ConfigError(
            f"{run_dir / 'events.jsonl'}: no trial_started event for {trial.name}, so the idle "
            f"baseline cannot be placed in the recording: {give}"
        )
    # The client's clock minus the controller's: the rows are on the client's, events on ours.
    offset = _client_offset_ns(manifest)
    lead_s = (trial.start_ns - offset - started) / 1e9  # trial_started -> the pulse's rise
    end = first.pulse.start_index - round(lead_s * rate)
    start = end - round(seconds * rate)
    if start < 0:
        raise ConfigError(
            f"{recording.path}: the idle baseline ({seconds:g} s before {trial.name} started, "
            f"{-start / rate:.3f} s before the recording) is not in the recording: start "
            f"recording before the sweep, or {give}"
        )
    at, power = _binned(recording, start, end, bin_samples, options)
    tolerance = float(config_value(manifest, "energy.idle_tolerance_mw") or 5.0)
    try:
        baseline = judge_idle(at / rate, power, tolerance)
    except ValueError as exc:
        raise ConfigError(f"{recording.path}: idle baseline: {exc}: {give}") from None
    facts = {
        **baseline.facts(),
        "attempts": 1,
        "waited_s": 0.0,
        "source": "recording",
        "start_s": start / rate,
        "end_s": end / rate,
    }
    return baseline.mean_mw, facts


def _client_offset_ns(manifest: Mapping[str, Any]) -> int:
    nodes = manifest.get("nodes")
    client = nodes.get("client") if isinstance(nodes, Mapping) else None
    clock = client.get("clock") if isinstance(client, Mapping) else None
    offset = clock.get("wall_offset_ns") if isinstance(clock, Mapping) else None
    return int(offset) if isinstance(offset, int | float) else 0


def _trace(
    recording: Recording,
    matched: Matched,
    *,
    row_index: int,
    bin_samples: int,
    idle_mw: float,
    options: ImportOptions,
) -> _Trace:
    """One trial's energy over its pulse at full rate, and its binned trace."""
    rate = recording.rate_hz
    pulse = matched.pulse
    pad = _PAD_BINS * bin_samples
    first = max(0, pulse.start_index - pad)
    first -= first % bin_samples
    end = pulse.end_index + 1 + pad
    end = min(recording.length, end + (-end) % bin_samples)  # whole bins, as far as it goes
    chunk = max(bin_samples, options.chunk_samples - options.chunk_samples % bin_samples)
    fold = EnergyFold.over(pulse.start_index, pulse.end_index)
    at: list[F64] = []
    means: list[F64] = []
    for index, power in recording.power_chunks(first, end, chunk):
        # Which NaNs the instrument wrote, read again only where there are any.
        clipped = recording.clipped(index, len(power)) if np.isnan(power).any() else None
        fold = fold_power(fold, power, index, clipped)
        centres, mean = bin_means(power, index, bin_samples)
        at.append(centres)
        means.append(mean)
    trial = matched.expected.name
    try:
        total = window_total(fold, rate)
    except ValueError as exc:
        raise ConfigError(
            f"{recording.path}: pulse {matched.number} (trial {trial}): {exc}"
        ) from None
    t_s = np.concatenate(at) / rate if at else np.empty(0)
    power_mw = np.concatenate(means) if means else np.empty(0)
    start_s, end_s = pulse.start_index / rate, pulse.end_index / rate
    window = TrialWindow(
        t_s, power_mw, start_s, end_s, total.samples_lost, samples_saturated=total.samples_saturated
    )
    duration = total.duration_s
    energy = WindowEnergy(
        energy_mj=total.energy_mj,
        energy_above_idle_mj=total.energy_mj - idle_mw * duration,
        mean_power_mw=total.energy_mj / duration if duration > 0 else fold.first_mw,
        duration_s=duration,
        samples=total.samples,
    )
    return _Trace(row_index, matched.expected.trial_id, matched.number, window, energy)


def _supply_v(manifest: Mapping[str, Any]) -> float:
    """The config's supply voltage, what a step of the Joulescope's current is power at."""
    configured = config_value(manifest, "meter.supply_v")
    ok = isinstance(configured, int | float) and not isinstance(configured, bool)
    return float(configured) if ok and configured > 0 else DEFAULT_SUPPLY_V


def _meter_facts(
    recording: Recording,
    scan: ScanState,
    *,
    pulses: int,
    bin_samples: int,
    options: ImportOptions,
    manifest: Mapping[str, Any],
) -> dict[str, Any]:
    annotations = recording.annotations()
    return {
        "source": SOURCE,
        "kind": SOURCE,
        "recording": str(recording.path.resolve()),
        "recording_bytes": recording.bytes,
        "instrument": recording.source,
        "sample_rate_hz": recording.rate_hz,
        "trace_rate_hz": recording.rate_hz / bin_samples,
        "resolution": joulescope(recording.source.get("model", ""), _supply_v(manifest)).to_dict(),
        "samples": recording.length,
        "signals": {s.name: s.units for s in recording.signals.values()},
        "power_from": recording.power_from,
        "marker_input": options.marker,
        "pulses": pulses,
        # The drops outside every trial's window are lost too, though no row counts them.
        "drops": len(scan.drops),
        "samples_dropped": sum(d.end_index - d.start_index for d in scan.drops),
        "notes": recording.notes(),
        "annotations": [
            {"index": a.index, "t_s": a.index / recording.rate_hz, "kind": a.kind, "text": a.text}
            for a in annotations[:_MAX_ANNOTATIONS]
        ],
    }
