"""What each protocol event costs the client, from a run with traces (`[run] events = true`):
its phase energies fitted against its event counts (analysis.qlog_counts) and the kernel's
packet work, beside the per-frame model (analysis.frame_model, whose fit this reuses).

    exchange energy above idle = b0 + b1 wire + b2 flow control + b3 ACK + b4 kernel packets
                                 + b5 softirqs
    connect energy above idle  = b0 + b1 handshake packets

per trial in uJ, where (client side, sent and received summed):
- wire: HTTP/2 DATA frames, or QUIC packets (datagrams received where the trace logs fewer
  packets than datagrams, as qh3 does);
- flow control: WINDOW_UPDATE, or MAX_DATA and MAX_STREAM_DATA frames (where the client's trace
  lists no frames, qh3's, the server's count of those it received: server_max_data_frames +
  server_max_stream_data_frames);
- ACK: QUIC ACK frames (HTTP/2 has none: TCP's are in the kernel's segments);
- kernel packets: the node's UDP datagrams and TCP segments in and out (trials.csv);
- softirqs: its NET_RX and NET_TX softirqs;
- handshake packets: QUIC Initial and Handshake packets (an HTTP/2 trace holds no TCP or TLS).

One fit per series of the run's category axes (per protocol), across the points of its numeric
axes: a point's trials fetch the same page with the same window, so their counts hardly vary
and a point alone cannot tell a cost per event from the fixed cost of a trial; across windows
they do. Ordinary least squares with Student-t intervals at the run's confidence
(frame_model.fit). A class whose counts the classes before it determine to within `DETERMINED`
of their variation (a window sweep moves them together), that does not vary, or that the
series' traces lack, is left out and named, its energy then in the others'. An event costs
energy, so a class whose cost comes out below zero (it trades off against those it moves with)
is left out too and the fit redone, the furthest below zero in standard errors first, until
every class's cost is zero or more (the intervals are then those of the classes kept).

The h2-vs-h3 decomposition (`decomposition_blocks`), per compared point: the difference in mean
energy (Welch interval, analysis.categories), and its parts: the idle baseline over the windows,
per class the energy it accounts for on each side (mean count x that series' cost per event,
h3 minus h2), the fits' fixed costs per trial (intercepts), the close phase (not fitted), and the
unexplained rest (the point's mean residuals, and trials without counts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.categories import category_axes, category_differences, reference_of, series_of
from analysis.document import Block, Heading, Paragraph, Table
from analysis.errors import RunFormatError
from analysis.frame_model import INTERCEPT, Fit, Response, Term, fit
from analysis.frame_model import summary_rows as frame_model_rows
from analysis.load import Run
from analysis.points import plain
from analysis.tables import value_text

__all__ = [
    "CONNECT",
    "DETERMINED",
    "EXCHANGE",
    "EventFit",
    "decompose",
    "decomposition_blocks",
    "event_cost_blocks",
    "event_design",
    "fit_events",
    "summary_rows",
]

DETERMINED = 0.01
"""A class the classes before it explain 99 % of (a variance inflation above 100) has no cost
this run can give: its interval would span anything."""

WIRE = Term("wire", "per DATA frame (HTTP/2) or QUIC packet")
FLOW_CONTROL = Term("flow_control", "per WINDOW_UPDATE or MAX_DATA/MAX_STREAM_DATA frame")
ACK = Term("ack", "per QUIC ACK frame")
KERNEL_PACKETS = Term("kernel_packets", "per UDP datagram or TCP segment through the kernel")
SOFTIRQS = Term("softirqs", "per NET_RX/NET_TX softirq")
HANDSHAKE = Term("handshake", "per QUIC Initial/Handshake packet")


@dataclass(frozen=True)
class Phase:
    name: str
    response: Response
    column: str  # the phase's energy above idle, mJ
    terms: tuple[Term, ...]


EXCHANGE = Phase(
    "exchange",
    Response("exchange_above_idle_uj", "exchange energy above idle", "uJ"),
    "energy_exchange_above_idle_mj",
    (INTERCEPT, WIRE, FLOW_CONTROL, ACK, KERNEL_PACKETS, SOFTIRQS),
)
CONNECT = Phase(
    "connect",
    Response("connect_above_idle_uj", "connect energy above idle", "uJ"),
    "energy_connect_above_idle_mj",
    (INTERCEPT, HANDSHAKE),
)
PHASES = (EXCHANGE, CONNECT)
_TERMS = {t.name: t for phase in PHASES for t in phase.terms[1:]}
_IDLE = "idle baseline over the window"
_FIXED = "fixed per trial (the fits' intercepts)"
_CLOSE = "close phase (not fitted)"
_UNEXPLAINED = "unexplained (mean residuals; trials without counts)"
_NOT_FITTED = "not fitted: in the fixed cost or the classes it moves with"
_NEGATIVE = "its cost came out below zero: it trades off against the classes it moves with"


def _column(ok: pd.DataFrame, name: str) -> pd.Series:
    """A column as numbers (trials.csv's kernel and QUIC columns are read as text), NaN where
    empty or absent."""
    if name not in ok:
        return pd.Series(math.nan, index=ok.index)
    try:
        return pd.to_numeric(ok[name].replace("", math.nan)).astype(float)
    except (ValueError, TypeError) as exc:
        raise RunFormatError(f"trials.csv: column {name}: not a number ({exc})") from None


def _both(ok: pd.DataFrame, stem: str) -> pd.Series:
    """The client's traced count of a class, sent plus received (NaN where either is)."""
    return _column(ok, f"client_traced_{stem}_sent") + _column(ok, f"client_traced_{stem}_received")


def event_design(ok: pd.DataFrame) -> pd.DataFrame:
    """Per ok trial, the fits' columns (module doc): NaN where the trial's traces cannot
    give the count."""
    received = _column(ok, "client_traced_packets_received").fillna(
        _column(ok, "client_traced_datagrams_received")
    )
    wire = _both(ok, "data_frames").fillna(_column(ok, "client_traced_packets_sent") + received)
    served = _column(ok, "server_max_data_frames") + _column(ok, "server_max_stream_data_frames")
    kernel = sum(
        _column(ok, f"client_{name}").fillna(0.0)
        for name in ("udp_datagrams_in", "udp_datagrams_out", "tcp_segments_in", "tcp_segments_out")
    )
    counted = (
        _column(ok, "client_udp_datagrams_in").notna()
        | _column(ok, "client_tcp_segments_in").notna()
    )
    return pd.DataFrame(
        {
            "trial_id": ok["trial_id"],
            INTERCEPT.name: 1.0,
            WIRE.name: wire,
            FLOW_CONTROL.name: _both(ok, "flow_control_frames").fillna(served),
            ACK.name: _both(ok, "ack_frames"),
            KERNEL_PACKETS.name: pd.Series(kernel, index=ok.index).where(counted),
            SOFTIRQS.name: _column(ok, "client_net_rx_softirqs")
            + _column(ok, "client_net_tx_softirqs"),
            HANDSHAKE.name: _both(ok, "handshake_packets"),
        },
        index=ok.index,
    )


@dataclass(frozen=True)
class EventFit:
    """One phase's fit for one series: the fit, or why there is none."""

    series: str  # "protocol h3", or "all trials" in a run without a category axis
    values: Mapping[str, object]  # the series' value of each category axis
    phase: Phase
    fit: Fit | None
    absent: tuple[str, ...]  # terms the series' trials have no count of
    why_none: str = ""
    negative: tuple[str, ...] = ()  # terms left out, in turn, for a cost below zero

    def cost_uj(self, term: str) -> float | None:
        """The fitted cost per event of a term; None where the fit left it out or has none."""
        if self.fit is None:
            return None
        return next((c.estimate for c in self.fit.coefficients if c.term.name == term), None)


def _series(run: Run) -> list[tuple[str, dict[str, object], pd.DataFrame]]:
    axes = category_axes(run)
    if not axes:
        return [("all trials", {}, run.ok)]
    found = []
    for key, rows in run.ok.groupby(list(axes), sort=True):
        values = {a: plain(v) for a, v in zip(axes, key, strict=True)}
        found.append((", ".join(f"{a} {v}" for a, v in values.items()), values, rows))
    return found


def _fit_one(
    series: tuple[str, dict[str, object], pd.DataFrame],
    design: pd.DataFrame,
    phase: Phase,
    confidence: float,
) -> EventFit:
    label, values, rows = series
    if phase.column not in rows:
        why = f"no {phase.column} column (phases not recorded)"
        return EventFit(label, values, phase, None, (), why)
    x = design.loc[rows.index]
    absent = tuple(t.name for t in phase.terms if t is not INTERCEPT and x[t.name].isna().all())
    terms = [t for t in phase.terms if t.name not in absent]
    y = rows[phase.column] * 1e3
    usable = int((x[[t.name for t in terms]].notna().all(axis=1) & y.notna()).sum())
    negative: list[str] = []
    while True:
        result = fit(
            rows["trial_id"],
            x,
            terms,
            y,
            confidence=confidence,
            group=label,
            response=phase.response,
            determined=DETERMINED,
        )
        below = _most_negative(result)
        if below is None:
            break
        negative.append(below)
        terms = [t for t in terms if t.name != below]
    why = "" if result else f"{usable} trials with every count, too few for {len(terms)} terms"
    return EventFit(label, values, phase, result, absent, why, tuple(negative))


def _most_negative(result: Fit | None) -> str | None:
    """The event class whose cost is furthest below zero, in standard errors; None when every
    class costs zero or more. An event costs energy: a negative cost is a class trading off
    against those it moves with, not a saving."""
    below = [
        (c.estimate / c.se if c.se > 0 else -math.inf, c.term.name)
        for c in (result.coefficients if result else ())
        if c.term is not INTERCEPT and c.estimate < 0
    ]
    return min(below)[1] if below else None


def fit_events(run: Run) -> list[EventFit]:
    """Per series and phase its fit (module doc); none for a run without traces."""
    if not any(column.startswith("client_traced_") for column in run.ok.columns):
        return []
    design = event_design(run.ok)
    return [
        _fit_one(series, design, phase, run.confidence)
        for series in _series(run)
        for phase in PHASES
    ]


def summary_rows(fits: Sequence[EventFit], axes: Sequence[str]) -> pd.DataFrame:
    """summary.csv rows, one per fitted cost: metric `event_cost:<phase response>:<term>`
    (frame_model.summary_rows), the series' category axes set, the other axes empty."""
    tables = [
        frame_model_rows([item.fit], axes, "event_cost").assign(**dict(item.values))
        for item in fits
        if item.fit is not None
    ]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def _cost_text(estimate: float, low: float, high: float) -> str:
    return f"{estimate:.4g} [{low:.4g}, {high:.4g}]"


def cost_table(fits: Sequence[EventFit]) -> Table:
    """A row per series, phase and term: its cost per event in uJ with its CI, or why the run
    cannot give it."""
    body: list[tuple[str, ...]] = []
    for item in fits:
        f = item.fit
        fitted = f"n {f.n}, R² {f.r2:.3f}" if f is not None else "-"
        if f is None:
            body.append((item.series, item.phase.name, "-", "-", f"not fitted: {item.why_none}"))
            continue
        entangled = {name: other for a, b, _r in f.entangled for name, other in ((a, b), (b, a))}
        for c in f.coefficients:
            note = fitted
            if c.term.name in entangled:
                note += f"; moves with {entangled[c.term.name]} (|r| > 0.95)"
            body.append(
                (
                    item.series,
                    item.phase.name,
                    f"{c.term.name} ({c.term.label})",
                    _cost_text(c.estimate, c.ci_low, c.ci_high),
                    note,
                )
            )
        for name, why in f.left_out:
            body.append((item.series, item.phase.name, name, "-", f"left out: {why}"))
        for name in item.negative:
            body.append((item.series, item.phase.name, name, "-", f"left out: {_NEGATIVE}"))
        for name in item.absent:
            body.append(
                (item.series, item.phase.name, name, "-", "left out: not in this series' traces")
            )
    level = f"{fits[0].fit.confidence * 100:g} %" if fits and fits[0].fit else "the run's"
    return Table(
        ("series", "phase", "event class", f"cost (uJ per event) [{level} t-CI]", "fit"),
        tuple(body),
        "Cost per event: each phase's energy above idle fitted against the client's event "
        "counts, a fit per series across its points.",
    )


def event_cost_blocks(run: Run, fits: Sequence[EventFit]) -> list[Block]:
    """The report's "Energy per event" section: how the costs were fitted, the table."""
    if not fits:
        return []
    return [
        Heading("Energy per event"),
        Paragraph(
            "Each trial's exchange and connect energies above idle are fitted (ordinary least "
            "squares) against its client's event counts from its qlog traces and its kernel's "
            "packet work: DATA frames or QUIC packets, flow-control updates (WINDOW_UPDATE; "
            "MAX_DATA/MAX_STREAM_DATA), ACK frames, UDP datagrams and TCP segments, softirqs, "
            "and for connect the QUIC handshake packets. One fit per series across its points: "
            "within a point the counts hardly vary, so a point alone cannot tell a cost per "
            "event from a trial's fixed cost. The model is linear with a constant cost per event "
            "across the series' points; a class that the classes before it determine (a window "
            "sweep moves frames, updates and packets together), that does not vary, that the "
            "traces lack, or whose cost comes out below zero (an event costs energy: it trades "
            "off against one it moves with), is left out and named: its energy is then in the "
            "others' costs. "
            "analysis/README.md states the method."
        ),
        cost_table(fits),
    ]


@dataclass(frozen=True)
class Part:
    name: str
    reference_count: float  # mean count per trial; NaN for parts that are not an event class
    other_count: float
    reference_cost_uj: float | None
    other_cost_uj: float | None
    energy_mj: float  # other's minus reference's


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if values.notna().any() else math.nan


def _accounted(count: float, cost: float | None) -> float:
    """A class's energy per trial in mJ: 0 where the fit has no cost for it or the series no
    count of it (its energy is then in the parts that do)."""
    return 0.0 if cost is None or math.isnan(count) else count * cost / 1e3


def decompose(
    difference_mj: float,
    reference: pd.DataFrame,
    other: pd.DataFrame,
    reference_fits: Mapping[str, EventFit],
    other_fits: Mapping[str, EventFit],
) -> list[Part]:
    """The parts of `difference_mj` (other's mean energy_mj minus the reference's, at one
    point; `reference`, `other`: its ok rows per series), summing to it: the idle baseline,
    each class, the fixed costs, the close phase and the unexplained rest. `*_fits`: per phase
    name, that series' fit."""
    design = {side: event_design(rows) for side, rows in (("r", reference), ("o", other))}
    parts: list[Part] = []

    def idle(rows: pd.DataFrame) -> float:
        return _mean(_column(rows, "energy_mj") - _column(rows, "energy_above_idle_mj"))

    nan = math.nan
    parts.append(Part(_IDLE, nan, nan, None, None, idle(other) - idle(reference)))
    for phase in PHASES:
        for term in phase.terms[1:]:
            count_r, count_o = (_mean(design[side][term.name]) for side in ("r", "o"))
            cost_r = reference_fits[phase.name].cost_uj(term.name)
            cost_o = other_fits[phase.name].cost_uj(term.name)
            energy = _accounted(count_o, cost_o) - _accounted(count_r, cost_r)
            parts.append(Part(term.name, count_r, count_o, cost_r, cost_o, energy))
    fixed = sum(
        (other_fits[p.name].cost_uj(INTERCEPT.name) or 0.0)
        - (reference_fits[p.name].cost_uj(INTERCEPT.name) or 0.0)
        for p in PHASES
    )
    parts.append(Part(_FIXED, nan, nan, None, None, fixed / 1e3))
    close = _mean(_column(other, "energy_close_above_idle_mj")) - _mean(
        _column(reference, "energy_close_above_idle_mj")
    )
    parts.append(Part(_CLOSE, nan, nan, None, None, 0.0 if math.isnan(close) else close))
    explained = sum(part.energy_mj for part in parts if not math.isnan(part.energy_mj))
    parts.append(Part(_UNEXPLAINED, nan, nan, None, None, difference_mj - explained))
    return parts


def _count_text(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.4g}"


def _cost_cell(cost: float | None) -> str:
    return "-" if cost is None else f"{cost:.4g}"


def decomposition_table(
    parts: Sequence[Part], reference: str, other: str, difference: pd.Series, caption: str
) -> Table:
    level = f"{difference['confidence'] * 100:g} %"
    total = float(difference["difference"])
    first = (
        "energy difference (mJ)",
        "-",
        "-",
        "-",
        "-",
        f"{total:+.4g} [{difference['difference_ci_low']:+.4g}, "
        f"{difference['difference_ci_high']:+.4g}] ({level} Welch CI)",
        "100 %",
    )
    body = [first]
    for part in parts:
        counted = not (math.isnan(part.reference_count) and math.isnan(part.other_count))
        if part.name in _TERMS and not counted:
            continue  # a class neither series' traces have
        share = part.energy_mj / total * 100 if total else math.nan
        unfitted = part.name in _TERMS and part.reference_cost_uj is None is part.other_cost_uj
        body.append(
            (
                _TERMS[part.name].name + f" ({_TERMS[part.name].label.removeprefix('per ')})"
                if part.name in _TERMS
                else part.name,
                _count_text(part.reference_count),
                _count_text(part.other_count),
                _cost_cell(part.reference_cost_uj),
                _cost_cell(part.other_cost_uj),
                _NOT_FITTED if unfitted else f"{part.energy_mj:+.4g}",
                "-" if math.isnan(share) or unfitted else f"{share:+.0f} %",
            )
        )
    return Table(
        (
            "part",
            f"{reference} count",
            f"{other} count",
            f"{reference} uJ/event",
            f"{other} uJ/event",
            f"{other} - {reference} (mJ)",
            "share",
        ),
        tuple(body),
        caption,
    )


def decomposition_blocks(run: Run, summary: pd.DataFrame, fits: Sequence[EventFit]) -> list[Block]:
    """Per category axis of two series or more and per compared point: the energy difference
    against the reference series and its parts (module doc). None without traces."""
    if not fits:
        return []
    by_series = {(item.series, item.phase.name): item for item in fits}
    blocks: list[Block] = []
    for axis in category_axes(run):
        values = series_of(run, axis)
        if len(values) < 2 or len(category_axes(run)) > 1:
            continue
        reference = reference_of(axis, values)
        differences = category_differences(summary, run.axes, axis, run)
        differences = differences[differences["metric"] == "energy_mj"]
        if differences.empty:
            continue
        others = [a for a in run.axes if a != axis]
        tables: list[Block] = []
        for _, row in differences.iterrows():
            other = str(row[axis])
            at = np.ones(len(run.ok), dtype=bool)
            for a in others:
                at &= (run.ok[a].map(plain) == plain(row[a])).to_numpy()
            side = run.ok[axis].map(lambda v: str(plain(v)))
            parts = decompose(
                float(row["difference"]),
                run.ok[at & (side == reference).to_numpy()],
                run.ok[at & (side == other).to_numpy()],
                {p.name: by_series[(f"{axis} {reference}", p.name)] for p in PHASES},
                {p.name: by_series[(f"{axis} {other}", p.name)] for p in PHASES},
            )
            where = ", ".join(f"{a} {value_text(row[a])}" for a in others) or "the run"
            tables.append(
                decomposition_table(
                    parts, reference, other, row, f"{other} - {reference} at {where}"
                )
            )
        blocks += [
            Heading(
                f"Where {' and '.join(v for v in values if v != reference)}'s energy "
                f"differs from {reference}'s, by event class"
            ),
            Paragraph(
                "Per point, the difference in mean client energy with its Welch interval, "
                "split into the idle baseline over the two windows; per event class the energy "
                "it accounts for (each series' mean count per trial x its fitted cost per "
                "event, Energy per event); the fits' fixed costs per trial; the close phase; "
                "and the rest the counts do not explain. A class a fit left out (constant, or "
                "moving with another) has its energy in the fixed cost or in that class's. The "
                "parts sum to the difference."
            ),
            *tables,
        ]
    return blocks
