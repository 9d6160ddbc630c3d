"""The report's energy sections: the meter (its rate, its resolution and what one step of it
means in mJ for the median trial), the idle baseline and its check, each trial's ground truth
against the model of its own activity (modelled meters), and the per-frame cost model; and the
one-line warnings of the baseline and the ground truth for the report's first screen
(`idle_caveats`, `truth_caveats`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.agreement import TOLERANCE, outside
from analysis.document import Block, Bullets, Heading, Paragraph, Table
from analysis.frame_model import Fit
from analysis.load import Run
from analysis.manifest import config_value
from analysis.meter_floor import current_text, positive, range_step

_WORST = 5


def _number(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and np.isfinite(value):
        return f"{value:.{digits}g}"
    return "-"


def _baselines(run: Run) -> dict[str, Mapping[str, Any]]:
    """The baseline's facts before and after the sweep, those the manifest has."""
    found: dict[str, Mapping[str, Any]] = {}
    for when, key in (("before", "idle_baseline"), ("after", "idle_baseline_end")):
        facts = run.manifest.get(key)
        if isinstance(facts, Mapping):
            found[when] = facts
    return found


def _mw(facts: Mapping[str, Any], key: str) -> float | None:
    value = facts.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        return None
    return float(value)


def idle_caveats(run: Run) -> list[str]:
    """A baseline that was not quiet, or idle power that moved over the sweep by more than a
    quiet baseline may: energy above idle is uncertain by that much."""
    lines = []
    found = _baselines(run)
    noisy = {when: facts for when, facts in found.items() if facts.get("quiet") is False}
    if noisy:
        facts = next(iter(noisy.values()))
        spread, drift, bound = (_mw(facts, k) for k in ("spread_mw", "drift_mw", "bound_mw"))
        detail = (
            ""
            if spread is None or drift is None or bound is None
            else f" (spread {spread:.0f} mW, drift {drift:+.0f} mW; {bound:.0f} mW allowed)"
        )
        lines.append(
            f"Idle baseline not quiet {' and '.join(noisy)} the sweep{detail}: energy above idle "
            "is as uncertain (Idle baseline)."
        )
    end = found.get("after")
    change = None if end is None else _mw(end, "change_mw")
    bound = None if end is None else _mw(end, "bound_mw")
    if change is not None and bound is not None and abs(change) > bound:
        lines.append(
            f"Idle power moved {change:+.0f} mW over the sweep ({bound:.0f} mW allowed): energy "
            "above idle drifts as much (Idle baseline)."
        )
    return lines


def truth_caveats(table: pd.DataFrame | None) -> list[str]:
    """Trials whose metered energy strays from the model of the client's own activity."""
    if table is None or table.empty:
        return []
    stray = outside(table, TOLERANCE)
    if stray.empty:
        return []
    return [
        f"{len(stray)} of {len(table)} trials' energy is over {TOLERANCE * 100:g} % from the "
        "model of the client's activity: booked at the wrong moment, or something else ran "
        "(Ground truth of the modelled meter)."
    ]


def _median(run: Run, column: str) -> float | None:
    if column not in run.ok or run.ok.empty:
        return None
    value = pd.to_numeric(run.ok[column], errors="coerce").median()
    return float(value) if np.isfinite(value) else None


def _sight(resolution: Mapping[str, Any], supply_v: float) -> list[tuple[str, str]]:
    """What else the meter states it can see: its noise, full scale, voltage and conversion time,
    a row each ("not recorded" for a run from before meters stated them)."""
    unrecorded = "not recorded (a run from before meters stated it)"
    if "noise_ua" not in resolution:
        return [
            (label, unrecorded)
            for label in ("noise (rms a sample)", "full scale", "voltage", "conversion time")
        ]
    basis = str(resolution.get("noise_basis") or "unstated")
    noise = positive(resolution.get("noise_ua"))
    rate = positive(resolution.get("sample_rate_hz"))
    at_rate = f" at {_number(rate, 6)} samples/s" if rate is not None else ""
    full_scale = positive(resolution.get("full_scale_ua"))
    conversion = positive(resolution.get("conversion_us"))
    bandwidth = positive(resolution.get("bandwidth_hz"))
    voltage = str(resolution.get("voltage") or "unstated")
    return [
        (
            "noise (rms a sample)",
            f"not stated: {basis}"
            if noise is None
            else f"{current_text(noise)}, {_number(noise * supply_v / 1000)} mW{at_rate}: {basis}",
        ),
        (
            "full scale",
            "not stated"
            if full_scale is None
            else f"{current_text(full_scale)}, {_number(full_scale * supply_v / 1000)} mW",
        ),
        ("voltage", f"assumed {_number(supply_v)} V" if voltage == "assumed" else voltage),
        (
            "conversion time",
            ("not stated" if conversion is None else f"{_number(conversion)} us")
            + ("" if bandwidth is None else f"; bandwidth {_number(bandwidth / 1e3)} kHz"),
        ),
    ]


def meter_facts(run: Run) -> list[tuple[str, str]]:
    """The meter's source, rate and resolution as the manifest names them, and one step of it
    in mJ over the median trial's window (`controller.meter.resolution` writes the record)."""
    meter = run.manifest.get("meter")
    meter = meter if isinstance(meter, Mapping) else {}
    source = meter.get("source") or config_value(run.manifest, "meter.source") or "unknown"
    kind = meter.get("kind")
    rows = [("meter", f"{source}" + (f" ({kind})" if kind and kind != source else ""))]
    rate = positive(meter.get("sample_rate_hz"))
    configured = positive(config_value(run.manifest, "meter.rate_hz"))
    if rate is not None:
        rows.append(("sample rate (Hz)", _number(rate, 6)))
    elif configured is not None:
        rows.append(("sample rate (Hz)", f"{_number(configured, 6)} (configured)"))
    else:
        rows.append(("sample rate (Hz)", "not recorded"))
    for key, label in (
        ("stream_rate_hz", "stream rate (Hz)"),
        ("trace_rate_hz", "trace rate (Hz)"),
    ):
        extra = positive(meter.get(key))
        if extra is not None and extra != rate:
            rows.append((label, _number(extra, 6)))
    resolution = meter.get("resolution")
    step_ua = positive(resolution.get("current_ua")) if isinstance(resolution, Mapping) else None
    supply = positive(resolution.get("supply_v")) if isinstance(resolution, Mapping) else None
    if not isinstance(resolution, Mapping) or step_ua is None or supply is None:
        rows.append(
            (
                "resolution",
                "not recorded: this run's manifest names no meter resolution (recorded before "
                "meters stated theirs), so what one step means in mJ is not known here",
            )
        )
        return rows
    power = _median(run, "mean_power_mw")
    step_ua, which = range_step(resolution, None if power is None else power / supply * 1000)
    step_mw = step_ua * supply / 1000
    rows += [
        ("resolution (current per step)", f"{current_text(step_ua)}{which}"),
        ("resolution (mW per step)", f"{_number(step_mw)} at {_number(supply)} V"),
        ("resolution from", str(resolution.get("basis") or "unstated")),
        *_sight(resolution, supply),
    ]
    window = _median(run, "window_s")
    if window is None:
        rows.append(("one step over the median trial", "no ok trial with a window"))
        return rows
    step_mj = step_mw * window
    energy = _median(run, "energy_mj")
    share = (
        f"; the median trial's energy is {_number(energy)} mJ, {energy / step_mj:.3g} steps"
        if energy is not None and step_mj > 0
        else ""
    )
    rows.append(
        (
            "one step over the median trial",
            f"{_number(step_mj)} mJ (one step held over the median window, "
            f"{window * 1e3:.4g} ms){share}",
        )
    )
    return rows


def meter_blocks(run: Run) -> list[Block]:
    """The meter's section: `meter_facts` with what they mean."""
    return [
        Heading("Meter"),
        Paragraph(
            "The meter that gave each trial its energy, at the rate it sampled, and the "
            "smallest change of current it resolves (one step of its ADC or register; for an "
            "auto-ranging meter, of the range the median trial's mean current sits in) as power "
            "at its supply voltage. One step held over the median trial's window is what a "
            "reading off by one step for the whole trial would shift its energy by: noise "
            "averages out over the samples, a bias of that size does not, so differences "
            "between settings of that order are at the meter's resolution (data/README.md)."
        ),
        Table(("fact", "value"), tuple(meter_facts(run))),
    ]


def idle_blocks(run: Run) -> list[Block]:
    """The baseline before (and after) the sweep, with its check (controller/sweep/baseline.py)."""
    found = _baselines(run)
    if not found:
        return []
    keys = (
        ("mean_mw", "mean (mW)"),
        ("sd_mw", "sd of the samples (mW)"),
        ("noise_mw", "meter noise (mW)"),
        ("spread_mw", "spread of its fifths (mW)"),
        ("drift_mw", "drift over it (mW)"),
        ("bound_mw", "allowed spread and drift (mW)"),
        ("quiet", "quiet"),
        ("attempts", "attempts"),
        ("duration_s", "length (s)"),
    )
    rows = tuple((label, *(_number(found[when].get(key)) for when in found)) for key, label in keys)
    blocks: list[Block] = [
        Heading("Idle baseline"),
        Paragraph(
            "The idle power subtracted in energy above idle, measured once the nodes were quiet "
            "and checked: quiet when every fifth of it is within the allowed spread of the "
            "others and it does not drift by more (the tolerance plus 4 standard errors of the "
            "meter's own noise, configs/README.md [energy])."
        ),
        Table(("", *(f"{when} the sweep" for when in found)), rows),
    ]
    end = found.get("after")
    change = end.get("change_mw") if end else None
    if isinstance(change, int | float) and "window_s" in run.ok:
        window = float(run.ok["window_s"].median())
        blocks.append(
            Paragraph(
                f"The idle power moved by {change:+.1f} mW between the two: on a median "
                f"window of {window * 1e3:.0f} ms, energy above idle is uncertain by about "
                f"{abs(change) * window:.2f} mJ from that drift."
            )
        )
    return blocks


def truth_blocks(table: pd.DataFrame | None) -> list[Block]:
    """Each trial's ground truth against the model applied to the client's own activity
    (`analysis.agreement.agreement`'s table; None for a run without a modelled meter)."""
    if table is None or table.empty:
        return []
    stray = outside(table, TOLERANCE)
    ratios = table["ratio"]
    worst = table.reindex((ratios - 1).abs().sort_values(ascending=False).index).head(_WORST)
    return [
        Heading("Ground truth of the modelled meter"),
        Paragraph(
            "The modelled meter's exact power, integrated over each trial's own window, against "
            "its model applied to the client's own activity in that window as the agent "
            "measured it (its CPU time; the bytes on its interface in the window: between the "
            "fetch's marker edges, or over the trial process; analysis/agreement.py). A ratio "
            "far from 1 means the meter booked work at the "
            "wrong moment, or that something else ran on the node. The bytes are the network "
            "term's own input, so this checks when the traffic was booked, not whose it was: "
            "on loopback, shared by both nodes and the rest of the machine, other traffic "
            "counts too (data/README.md)."
        ),
        Table(
            ("trials", f"within {TOLERANCE * 100:g} %", "median ratio", "lowest", "highest"),
            (
                (
                    str(len(table)),
                    str(len(table) - len(stray)),
                    f"{ratios.median():.3f}",
                    f"{ratios.min():.3f}",
                    f"{ratios.max():.3f}",
                ),
            ),
        ),
        Table(
            ("trial", "window (ms)", "CPU (ms)", "truth above idle (mJ)", "model (mJ)", "ratio"),
            tuple(
                (
                    str(row["trial_id"]),
                    f"{row['window_s'] * 1e3:.1f}",
                    f"{row['cpu_s'] * 1e3:.2f}",
                    f"{row['truth_above_idle_mj']:.2f}",
                    f"{row['model_mj']:.2f}",
                    f"{row['ratio']:.3f}",
                )
                for _, row in worst.iterrows()
            ),
            f"The {len(worst)} trials furthest from the model",
        ),
    ]


def frame_model_blocks(fits: Sequence[Fit]) -> list[Block]:
    """The per-frame cost model's coefficients with their CIs, per engine and device."""
    blocks: list[Block] = [
        Heading("Per-frame cost model"),
        Paragraph(
            "Energy above idle (uJ) and client CPU time (us) per trial, fitted by least squares "
            "as a linear function of the DATA frames the client received, the WINDOW_UPDATE "
            "frames it sent, the KiB it received and sent, the energy window's length in ms and "
            "the workload's own counts (analysis/frame_model.py). Each coefficient is what one "
            "more unit costs on this node, with a Student-t CI at n - p degrees of freedom; "
            "summary.csv has them as frame_model:* rows, report/frame_model_residuals.csv each "
            "trial's residual."
        ),
    ]
    if not fits:
        blocks.append(Paragraph("Not fitted: too few trials with frame counters."))
        return blocks
    for fit in fits:
        unit = fit.response.unit
        level = f"{fit.confidence * 100:g} %"
        blocks.append(
            Table(
                ("term", f"{unit} per unit", f"CI low ({level})", "CI high"),
                tuple(
                    (
                        c.term.label,
                        _number(c.estimate),
                        _number(c.ci_low),
                        _number(c.ci_high),
                    )
                    for c in fit.coefficients
                ),
                f"{fit.group}: {fit.response.label} per trial; n = {fit.n}, df = {fit.df}, "
                f"R² = {fit.r2:.3f}, residual sd = {fit.residual_sd:.3g} {unit}",
            )
        )
        notes = [f"{name}: not estimated, {why}" for name, why in fit.left_out]
        notes += [
            f"{a} and {b} move together in this run (r = {r:+.3f}): their coefficients trade "
            "off against each other; a sweep that varies one without the other (the "
            "WINDOW_UPDATE policy, the page size) separates them"
            for a, b, r in fit.entangled
        ]
        if notes:
            blocks.append(Bullets(tuple(notes)))
    return blocks


def residuals_table(fits: Sequence[Fit]) -> pd.DataFrame:
    """frame_model_residuals.csv: per fit and trial, measured, predicted and residual."""
    frames = [
        fit.residuals.assign(group=fit.group, response=fit.response.key, unit=fit.response.unit)
        for fit in fits
    ]
    columns = ["group", "response", "unit", "trial_id", "measured", "predicted", "residual"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]
