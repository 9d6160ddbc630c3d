"""A trial of several exchanges (the record's `exchanges` marks, one per exchange, in order) split
on the meter's samples: the energy per report, each exchange's busy span and the idle tail
after it. Pure.

Each exchange's marks are on the client's clock (CLOCK_MONOTONIC ns, the phases' clock), so
they are placed on the meter's timebase by the trial's `ClockMap` exactly as the phases are
(controller.sweep.phases: through the marker's edges, or the clock mapping; the row's
`phase_clock` says which) and held within the window. An exchange's busy span runs from its
start (the connect's start for a new or resumed connection, the request's under a kept one) to
its response's end; its idle tail from there to the next exchange's start, the last one's to
the window's end. A failed exchange (no response end) has neither. Each span is integrated as
the window is (`analysis.energy.window_energy_mj`), above idle its energy less the idle power
over its duration.

Memory: a span is integrated on a slice of the window's arrays (a view), so what this adds to
the window the engine already holds is one span's samples at a time and a few numbers per
exchange, however long the trial.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.energy import window_energy_mj, window_samples
from controller.sweep.phases import ClockMap, FloatArray

__all__ = ["ExchangeEnergy", "exchange_energy", "exchange_spans", "exchange_tally"]

Span = tuple[float, float]


@dataclass(frozen=True)
class ExchangeEnergy:
    """A trial's energy per exchange (mJ). `count`: the exchanges its record lists; the tails
    and busy spans are None where the record could not be placed on the meter's samples (no
    phases: an engine whose boundaries cannot be seen) or had no such span (every exchange
    failed)."""

    # The fields after `count` are analysis.trial_columns.EXCHANGE_ENERGY_FIELDS, by name.
    count: int
    energy_per_report_mj: float
    energy_per_report_above_idle_mj: float
    idle_tail_energy_mj: float | None = None  # summed over the tails
    idle_tail_mean_mj: float | None = None
    exchange_energy_mean_mj: float | None = None  # above idle, over those with a response


def exchange_spans(
    exchanges: Sequence[Mapping[str, Any]], clock: ClockMap, start_s: float, end_s: float
) -> tuple[list[Span], list[Span]]:
    """(busy spans, idle tails) on the meter's timebase, each held within [start_s, end_s] and
    never going back (module doc)."""

    def placed(at: object) -> float | None:
        if at is None:
            return None
        return min(max(clock.meter_s_of(int(str(at))), start_s), end_s)

    starts = [placed(exchange.get("start_mono_ns")) for exchange in exchanges]
    busy: list[Span] = []
    tails: list[Span] = []
    for index, exchange in enumerate(exchanges):
        began, ended = starts[index], placed(exchange.get("response_end_mono_ns"))
        if began is None or ended is None:
            continue
        ended = max(ended, began)
        busy.append((began, ended))
        following = next((s for s in starts[index + 1 :] if s is not None), end_s)
        tails.append((ended, max(following, ended)))
    return busy, tails


def _above_idle_mj(t_s: FloatArray, power_mw: FloatArray, span: Span, idle_mw: float) -> float:
    start, end = span
    if end <= start:
        return 0.0
    used = window_samples(t_s, start, end)
    return window_energy_mj(t_s[used], power_mw[used], start, end)[0] - idle_mw * (end - start)


def exchange_energy(
    exchanges: Sequence[Mapping[str, Any]],
    energy_mj: float,
    energy_above_idle_mj: float,
    *,
    trace: tuple[FloatArray, FloatArray, float, float] | None = None,
    clock: ClockMap | None = None,
    idle_mw: float = 0.0,
) -> ExchangeEnergy | None:
    """The trial's energy per exchange, from its window's energies (total and above idle) and
    the record's marks; the spans need the window's `trace` (t_s, power_mw, start_s, end_s) and
    the trial's `clock`. None for a record listing no exchange."""
    if not exchanges:
        return None
    count = len(exchanges)
    per_report = ExchangeEnergy(count, energy_mj / count, energy_above_idle_mj / count)
    if trace is None or clock is None:
        return per_report
    t_s, power_mw, start_s, end_s = trace
    busy, tails = exchange_spans(exchanges, clock, start_s, end_s)
    if not busy:
        return per_report
    busy_mj = [_above_idle_mj(t_s, power_mw, span, idle_mw) for span in busy]
    tail_mj = [_above_idle_mj(t_s, power_mw, span, idle_mw) for span in tails]
    return ExchangeEnergy(
        count,
        per_report.energy_per_report_mj,
        per_report.energy_per_report_above_idle_mj,
        idle_tail_energy_mj=sum(tail_mj),
        idle_tail_mean_mj=sum(tail_mj) / len(tail_mj),
        exchange_energy_mean_mj=sum(busy_mj) / len(busy_mj),
    )


def exchange_tally(exchanges: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, int], ...]:
    """How a trial's exchanges went, for the dashboard: ok and failed, then each handshake kind
    (kept, full, resumed, 0rtt) in the order it first occurred."""
    ok = sum(1 for exchange in exchanges if exchange.get("ok"))
    kinds = Counter(str(exchange.get("handshake")) for exchange in exchanges)
    return (("ok", ok), ("failed", len(exchanges) - ok), *kinds.items())
