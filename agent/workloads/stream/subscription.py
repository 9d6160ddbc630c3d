"""What a client asks for when it subscribes, pure: the request's paths, the query string that
carries the client params (checked by the spec's own `Param`, the same rule as `--param`), and
the bound on one item's size that both ends derive from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlencode

from agent.workloads.spec import ParamError
from agent.workloads.stream.item import Encoding
from agent.workloads.stream.spec import STREAM

SSE_PATH = "/stream/sse"
WEBSOCKET_PATH = "/stream/ws"
POLL_PATH = "/stream/poll"
# gRPC's path is the method's: agent.workloads.stream.proto.SUBSCRIBE_PATH

# Per double: a JSON double takes up to 24 characters and a comma ("-1.2345678901234567e-308"),
# CBOR 9 bytes, protobuf 8; base64 (CBOR in SSE) 4/3 of that; then the item's other fields.
_BYTES_PER_DOUBLE = 26
_ITEM_OVERHEAD_BYTES = 512
_QUERY_PARAMS = ("rate_hz", "payload_doubles", "duration_s", "encoding")


@dataclass(frozen=True)
class Subscription:
    rate_hz: float
    payload_doubles: int
    duration_s: float
    encoding: Encoding | Literal["protobuf"]  # gRPC carries protobuf, whatever was asked

    def query(self) -> str:
        return urlencode(
            {
                "rate_hz": repr(self.rate_hz),
                "payload_doubles": self.payload_doubles,
                "duration_s": repr(self.duration_s),
                "encoding": self.encoding,
            }
        )

    @property
    def max_item_bytes(self) -> int:
        """No item of this subscription, in any encoding or framing, is longer."""
        return _BYTES_PER_DOUBLE * self.payload_doubles + _ITEM_OVERHEAD_BYTES


def checked(rate_hz: object, payload_doubles: object, duration_s: object) -> Subscription:
    """A gRPC subscription's numbers, held to the params' ranges; ParamError otherwise."""
    return Subscription(
        rate_hz=float(STREAM.param("rate_hz").check(rate_hz)),
        payload_doubles=int(STREAM.param("payload_doubles").check(payload_doubles)),
        duration_s=float(STREAM.param("duration_s").check(duration_s)),
        encoding="protobuf",
    )


def parse_query(query: str) -> Subscription:
    """A subscription's query string; ParamError naming the first wrong or missing param."""
    given = dict(parse_qsl(query, keep_blank_values=True))
    values = {}
    for name in _QUERY_PARAMS:
        param = STREAM.param(name)
        if name in given:
            values[name] = param.parse(given[name])
        elif name == "encoding":
            values[name] = param.default
        else:
            raise ParamError(name, "missing from the subscription's query")
    return Subscription(
        rate_hz=float(values["rate_hz"]),
        payload_doubles=int(values["payload_doubles"]),
        duration_s=float(values["duration_s"]),
        encoding="cbor" if values["encoding"] == "cbor" else "json",
    )
