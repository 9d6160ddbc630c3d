"""The blob workload's part of the report: latency per request leads, in a figure of its own
(the workload's own-metrics figure holds too many panels for a first screen)."""

from __future__ import annotations

from analysis.workloads.base import Headline, WorkloadReport

REPORT = WorkloadReport(
    headline=Headline(
        ("workload_blob",),
        "blob_latency_mean_s",
        draws=("blob_latency_mean_s", "blob_latency_max_s"),
        caption="Latency per request (request sent to last byte), mean and largest per trial.",
    ),
)
