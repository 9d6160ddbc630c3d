"""The blob workload's declaration."""

from agent.protocols import PROTOCOLS
from agent.workloads.spec import VERIFY_PARAM, Field, Param, WorkloadSpec

BLOB = WorkloadSpec(
    protocols=PROTOCOLS,  # its client and server run over HTTP/3 too
    kind="blob",
    doc="GET /blob/<size_bytes> `requests` times on one connection, every body verified",
    params=(
        Param(
            "size_bytes",
            "int",
            65536,
            "bytes",
            "body size of each response",
            minimum=0,
            maximum=2**26,
        ),
        Param("requests", "int", 4, "", "requests per trial", "client", 1, 1000),
        Param(
            "mode",
            "choice",
            "sequential",
            "",
            "one request after another, or all at once (up to MAX_CONCURRENT_STREAMS)",
            choices=("sequential", "concurrent"),
        ),
        VERIFY_PARAM,
    ),
    fields=(
        Field("request_count", "requests answered completely"),
        Field("body_bytes", "response body bytes received, bytes"),
        Field("latency_mean_s", "mean of request sent -> last byte, s"),
        Field("latency_max_s", "largest request sent -> last byte, s"),
    ),
    spread_param="requests",
    count_field="request_count",
)
