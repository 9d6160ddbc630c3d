"""The api workload's pure figures: JMeter-style summary, and CPU % peaks over intervals."""

from __future__ import annotations

import math
import statistics
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from agent.cpu_peak import CpuPeak
from agent.workloads.api.spec import API
from agent.workloads.api.summary import errors_by_status, percentile, summarise

MS = 1_000_000


def test_the_summary_has_exactly_the_specs_fields() -> None:
    figures = summarise([0.1, 0.2, 0.3, 0.4], Counter({200: 3, 503: 1}), 4000, 2.0)
    assert list(figures) == [field.name for field in API.fields]
    assert figures["requests"] == 4 and figures["errors"] == 1
    assert figures["throughput_rps"] == 2.0 and figures["bandwidth_kbps"] == 2.0
    assert math.isclose(figures["latency_mean_s"], 0.25)
    assert math.isclose(figures["latency_sd_s"], statistics.stdev([0.1, 0.2, 0.3, 0.4]))
    assert figures["latency_p50_s"] == 0.2 and figures["latency_p99_s"] == 0.4


def test_nothing_answered_is_nulls_not_zeros() -> None:
    figures = summarise([], Counter(), 0, 0.0)
    assert figures["requests"] == 0
    assert all(figures[name] is None for name in figures if name not in ("requests", "errors"))
    one = summarise([0.5], Counter({200: 1}), 10, 0.5)
    assert one["latency_sd_s"] is None and one["latency_p90_s"] == 0.5


def test_errors_are_every_status_outside_2xx_by_status() -> None:
    statuses = Counter({200: 5, 201: 1, 204: 1, 400: 2, 503: 3})
    assert errors_by_status(statuses) == {"400": 2, "503": 3}
    assert summarise([0.1] * 12, statuses, 0, 1.0)["errors"] == 5


@given(st.lists(st.floats(0, 10), min_size=1, max_size=200), st.floats(0.01, 1.0))
def test_the_percentile_is_the_nearest_rank(values: list[float], fraction: float) -> None:
    ordered = sorted(values)
    value = percentile(ordered, fraction)
    at_or_below = sum(v <= value for v in ordered)
    assert at_or_below >= fraction * len(ordered) - 1e-9
    assert sum(v < value for v in ordered) < fraction * len(ordered)


def test_the_peak_is_the_busiest_whole_interval() -> None:
    peak = CpuPeak(0, 0, interval_ns=100 * MS)
    peak.feed(100 * MS, 20 * MS)  # 20 %
    peak.feed(200 * MS, 110 * MS)  # 90 %
    peak.feed(300 * MS, 150 * MS)  # 40 %
    assert peak.intervals == 3
    assert math.isclose(peak.result(), 90.0)
    assert math.isclose(peak.mean_pct, 50.0)


def test_an_early_feed_is_folded_into_the_next_interval() -> None:
    peak = CpuPeak(0, 0, interval_ns=100 * MS)
    peak.feed(5 * MS, 5 * MS)  # 100 % over 5 ms: not an interval on its own
    assert peak.peak_pct is None
    peak.feed(100 * MS, 30 * MS)
    assert peak.intervals == 1 and math.isclose(peak.result(), 30.0)


def test_a_span_shorter_than_an_interval_reports_its_mean() -> None:
    peak = CpuPeak(0, 0, interval_ns=100 * MS)
    assert peak.result() is None
    peak.feed(40 * MS, 10 * MS)
    assert math.isclose(peak.result(), 25.0)


@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 300)), max_size=50))
def test_the_peak_is_never_below_the_mean(steps: list[tuple[int, int]]) -> None:
    t = cpu = 0
    peak = CpuPeak(0, 0, interval_ns=100)
    for dt, dcpu in steps:
        t, cpu = t + dt, cpu + min(dcpu, dt)
        peak.feed(t, cpu)
    if peak.peak_pct is not None and peak.mean_pct is not None:
        # the mean includes a trailing part interval, whose rate can exceed every whole one's
        assert peak.peak_pct >= 0 and peak.mean_pct <= 100.0 + 1e-9
