"""The stream workload's declaration (stdlib only: the controller imports it at config load)."""

from agent.protocols import PROTOCOLS
from agent.workloads.spec import Field, Param, WorkloadSpec

TRANSPORTS = ("sse", "websocket", "grpc", "poll")
ENCODINGS = ("json", "cbor")
BACKPRESSURE = ("drop", "block")
MAX_PAYLOAD_DOUBLES = 2_000_000

STREAM = WorkloadSpec(
    protocols=PROTOCOLS,  # its client and server run over HTTP/3 too
    kind="stream",
    doc=(
        "subscribe for duration_s to tune items published at rate_hz, each carrying "
        "payload_doubles doubles, over SSE, WebSocket (RFC 8441), gRPC streaming or polling"
    ),
    params=(
        Param(
            "transport",
            "choice",
            "sse",
            "",
            "how items reach the client: text/event-stream, WebSocket over an extended CONNECT, "
            "a gRPC server stream, or GET of the latest item at rate_hz",
            choices=TRANSPORTS,
        ),
        Param("rate_hz", "float", 10.0, "Hz", "items published per second", "client", 0.01, 10_000),
        Param(
            "payload_doubles",
            "int",
            1000,
            "",
            "random doubles carried by each item",
            "client",
            0,
            MAX_PAYLOAD_DOUBLES,
        ),
        Param(
            "duration_s", "float", 5.0, "s", "how long the server publishes", "client", 0.01, 86_400
        ),
        Param(
            "encoding",
            "choice",
            "json",
            "",
            "item encoding for sse, websocket and poll (gRPC always carries protobuf; CBOR goes "
            "base64 in SSE's text events)",
            choices=ENCODINGS,
        ),
        Param(
            "backpressure",
            "choice",
            "drop",
            "",
            "when a subscriber's queued bytes exceed buffer_bytes: drop the item (counted) or "
            "wait until they drain",
            "server",
            choices=BACKPRESSURE,
        ),
        Param(
            "buffer_bytes",
            "int",
            65_536,
            "bytes",
            "bytes queued for one subscriber beyond which the backpressure policy applies",
            "server",
            0,
            2**30,
        ),
    ),
    fields=(
        Field("demanded_rate_hz", "the rate items were published at, Hz"),
        Field("received_rate_hz", "distinct items received per second of the subscription, Hz"),
        Field("items_published", "items the server published, dropped ones included"),
        Field("items_received", "distinct items received"),
        Field("items_dropped", "items the server dropped under backpressure (its count)"),
        Field("items_lost", "items missing from the received sequence numbers (dropped included)"),
        Field("items_repeated", "items received again (polling between two publications)"),
        Field("latency_mean_s", "mean of publish -> received, s"),
        Field("latency_p50_s", "median of publish -> received, s"),
        Field("latency_p99_s", "99th percentile (nearest rank) of publish -> received, s"),
        Field("latency_max_s", "largest publish -> received, s"),
        Field("payload_bytes", "item body bytes received (encoded items, no framing), bytes"),
        Field("subscription_s", "subscription request sent -> the end of its stream, s"),
    ),
    extra="stream",
)
