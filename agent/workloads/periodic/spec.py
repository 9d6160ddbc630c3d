"""The periodic workload's declaration (stdlib only: the controller imports it at config load).

The record contract shared with the controller (agent/README.md, "The periodic workload"): the
params below, the fields below as `metrics` (trials.csv's `periodic_<field>`), and the record's
top-level `exchanges`, one dict per exchange in order with the keys of `EXCHANGE_KEYS`.
"""

from agent.protocols import PROTOCOLS, protocols_where
from agent.workloads.periodic.protocol import KIND
from agent.workloads.spec import Field, Param, Refusal, WorkloadSpec

CONNECTIONS = ("keep", "new", "resume")
METHODS = ("GET", "POST")
KEEPALIVES = ("none", "ping")
HANDSHAKES = ("kept", "full", "resumed", "0rtt")
"""An exchange's `handshake`: on the kept connection, or on a new one after a full handshake,
a resumed one (a TLS 1.3 ticket), or a resumed one whose request went as 0-RTT early data."""

EXCHANGE_KEYS = (
    "index",
    "scheduled_mono_ns",
    "start_mono_ns",  # connect start (new, resume, a keep reconnect); request start under keep
    "connected_mono_ns",  # null under keep after the first connection
    "request_mono_ns",
    "response_end_mono_ns",  # null if the exchange failed
    "lateness_s",
    "handshake",
    "early_data_sent",
    "early_data_accepted",  # null where none was sent
    "connect_s",
    "connect_cpu_s",
    "response_s",
    "wire_bytes_sent",
    "wire_bytes_received",
    "ok",
    "error",
)
"""The keys of each entry of the record's `exchanges`; *_mono_ns on the client's
CLOCK_MONOTONIC, the clock of the record's `phases`."""

PERIODIC = WorkloadSpec(
    protocols=PROTOCOLS,
    kind=KIND,
    doc=(
        "`count` exchanges, one every interval_s (the first at the trial's start), each a GET "
        "of response_bytes or a POST of request_bytes, over a kept, a new or a resumed "
        "connection (TLS 1.3 tickets for h2, QUIC 0-RTT for h3)"
    ),
    params=(
        Param("count", "int", 20, "", "exchanges per trial", "client", 1, 100_000),
        Param(
            "interval_s",
            "float",
            1.0,
            "s",
            "from one exchange's scheduled start to the next's, on the client's monotonic clock",
            "client",
            0,
            86_400,
        ),
        Param("method", "choice", "GET", "", "what each exchange sends", choices=METHODS),
        Param("request_bytes", "int", 1024, "bytes", "a POST's body", "client", 0, 2**24),
        Param("response_bytes", "int", 1024, "bytes", "each response's body", "client", 0, 2**24),
        Param(
            "jitter_s",
            "float",
            0.0,
            "s",
            "each scheduled start moved by a uniform draw in +-jitter_s (seeded by the trial id)",
            "client",
            0,
            86_400,
        ),
        Param(
            "connection",
            "choice",
            "keep",
            "",
            "one connection for the trial, a new one per exchange, or a new one per exchange "
            "resuming the previous session (TLS 1.3 ticket; QUIC 0-RTT over h3)",
            choices=CONNECTIONS,
        ),
        Param(
            "keepalive",
            "choice",
            "none",
            "",
            "under keep: nothing while idle, or a PING (HTTP/2's frame, QUIC's) every keepalive_s",
            choices=KEEPALIVES,
        ),
        Param(
            "keepalive_s",
            "float",
            30.0,
            "s",
            "the keepalive PING's period while idle",
            "client",
            0.001,
            86_400,
        ),
    ),
    fields=(
        Field("exchanges_ok", "exchanges answered in full"),
        Field("exchanges_failed", "exchanges that failed (their error in `exchanges`)"),
        Field("handshakes_full", "connections opened with a full handshake"),
        Field("handshakes_resumed", "connections that resumed a session (0-RTT ones included)"),
        Field("handshakes_0rtt", "resumed connections whose request went as early data"),
        Field("early_data_sent", "requests sent as 0-RTT early data"),
        Field("early_data_accepted", "early-data requests the server accepted and answered"),
        Field("early_data_refused", "early-data requests refused (425, or 0-RTT rejected)"),
        Field("reconnects", "kept connections lost (a server idle timeout) and opened again"),
        Field("late_exchanges", "exchanges started 10 ms or more after their scheduled time"),
        Field("lateness_max_s", "largest scheduled -> actual start, s"),
        Field("connect_mean_s", "mean connect time over the connections opened, s"),
        Field("connect_cpu_mean_s", "mean client CPU per connect, s"),
        Field("response_mean_s", "mean request sent -> last response byte, s"),
        Field("wire_mean_bytes", "mean bytes on the wire per exchange, sent + received, bytes"),
        Field("keepalive_pings", "keepalive PINGs acknowledged"),
        Field("keepalive_bytes", "bytes on the wire of the keepalive PINGs, bytes"),
    ),
    count_field="exchanges_ok",
    refusals=(
        Refusal("connection", "resume", protocols_where(tls=False), "no TLS, no session to resume"),
    ),
    schedule=("count", "interval_s", "jitter_s"),
    exchange_marks=True,
)
