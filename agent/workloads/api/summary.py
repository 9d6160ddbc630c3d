"""The api workload's trial figures from its requests, as JMeter's summary report has them:
requests, errors, throughput, bandwidth, latency mean, sd and percentiles. Pure."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from agent.workloads.api.spec import API

FIELD_NAMES = tuple(field.name for field in API.fields)


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of sorted values (JMeter's: the smallest value with at least
    `fraction` of them at or below it)."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summarise(
    latencies_s: Sequence[float],
    statuses: Counter[int],
    body_bytes: int,
    span_s: float,
) -> dict[str, object]:
    """The spec's fields, exactly: `latencies_s` of every answered request, `statuses` their
    statuses, `span_s` from the first request sent to the last response's end. None where a
    figure needs what the trial did not have (no answer: no latency; one answer: no sd)."""
    answered = sum(statuses.values())
    errors = sum(count for status, count in statuses.items() if not 200 <= status < 300)
    ordered = sorted(latencies_s)
    count = len(ordered)
    mean = sum(ordered) / count if count else None
    sd = None
    if mean is not None and count > 1:
        sd = math.sqrt(sum((x - mean) ** 2 for x in ordered) / (count - 1))
    rate = span_s > 0 and answered > 0
    return {
        "requests": answered,
        "errors": errors,
        "throughput_rps": answered / span_s if rate else None,
        "bandwidth_kbps": body_bytes / span_s / 1000 if rate else None,
        "latency_mean_s": mean,
        "latency_sd_s": sd,
        "latency_p50_s": percentile(ordered, 0.50) if count else None,
        "latency_p90_s": percentile(ordered, 0.90) if count else None,
        "latency_p99_s": percentile(ordered, 0.99) if count else None,
    }


def errors_by_status(statuses: Counter[int]) -> dict[str, int]:
    """The non-2xx answers by status, as the record's extra `errors_by_status` ("503": n)."""
    return {
        str(status): count for status, count in sorted(statuses.items()) if not 200 <= status < 300
    }
