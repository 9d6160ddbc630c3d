"""The api workload's declaration."""

from agent.protocols import PROTOCOLS
from agent.workloads.spec import Field, Param, WorkloadSpec

# The users' connections: all of them as streams on the trial's one connection, or one each.
ONE_CONNECTION, PER_USER = "1", "per-user"

API = WorkloadSpec(
    protocols=PROTOCOLS,  # its client and server run over HTTP/3 too
    kind="api",
    doc="closed-loop users each GET the 7 list endpoints of a SQLite-backed REST API `loops` "
    "times, as the reference's JMeter plan",
    params=(
        Param("users", "int", 16, "", "closed-loop virtual users, all at once", "client", 1, 4096),
        Param(
            "loops", "int", 50, "", "rounds of the 7 list endpoints per user", "client", 1, 100_000
        ),
        Param(
            "think_time_ms",
            "float",
            0.0,
            "ms",
            "a user's pause between a response and its next request",
            "client",
            0,
            60_000,
        ),
        Param(
            "connections",
            "choice",
            ONE_CONNECTION,
            "",
            "all users as streams on one connection, or a connection per user",
            "client",
            choices=(PER_USER, ONE_CONNECTION),
        ),
        Param("page_size", "int", 50, "rows", "rows per list request", "client", 1, 1000),
        Param(
            "records",
            "int",
            1000,
            "rows",
            "rows per resource the database is seeded with",
            "setup",
            1,
            1_000_000,
        ),
        Param(
            "data_layer",
            "choice",
            "sql",
            "",
            "plain parameterised SQL (sqlite3) or SQLAlchemy's ORM",
            "server",
            choices=("sql", "orm"),
        ),
        Param(
            "body_limit_bytes",
            "int",
            65536,
            "bytes",
            "request bodies over this are refused with 413 before they are read whole",
            "server",
            1,
            2**24,
        ),
    ),
    fields=(
        Field("requests", "requests sent"),
        Field("errors", "requests not answered 2xx (by status in the record's errors_by_status)"),
        Field("throughput_rps", "requests answered / the trial's span, requests per second"),
        Field("bandwidth_kbps", "response body bytes received / the span, KB (1000 B) per second"),
        Field("latency_mean_s", "mean of request sent -> last byte, s"),
        Field("latency_sd_s", "sample standard deviation of the latency, s"),
        Field("latency_p50_s", "median latency, s"),
        Field("latency_p90_s", "90th percentile latency, s"),
        Field("latency_p99_s", "99th percentile latency, s"),
    ),
    extra="api",
    spread_param="users",  # closed-loop virtual users
    count_field="requests",
)
