"""What a client asks for when it subscribes, pure: the request's paths, the query string that
carries the client params (checked by the spec's own `Param`, the same rule as `--param`), the
bound on one item's size that both ends derive from them, and where a reconnecting SSE
subscriber resumes (its Last-Event-ID).

Every parser here raises SubscriptionError, and only that, on whatever a peer sent: the server
answers it with 400 (gRPC: INVALID_ARGUMENT) and the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlencode

from agent.workloads.spec import ParamError, ParamValue
from agent.workloads.stream.errors import SubscriptionError
from agent.workloads.stream.item import Encoding
from agent.workloads.stream.schedule import Schedule
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

LAST_EVENT_ID = b"last-event-id"
# The id of the end event: an EventSource that reconnects after it sends it back, and is told
# to stop (204) instead of being given the publication again.
END_EVENT_ID = "end"
# An item's number in decimal; a longer id is none of a subscription's (at most 8.64e8 items).
_MAX_ID_DIGITS = 20


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

    @property
    def items(self) -> int:
        """Items the subscription publishes, numbered 0..items-1."""
        return Schedule(self.rate_hz, self.duration_s).items


@dataclass(frozen=True)
class Resumption:
    """Where an SSE subscription starts for one request: at item `first_seq`, or nowhere
    (`ended`: the subscriber had its end event)."""

    first_seq: int = 0
    ended: bool = False


@contextmanager
def _peers_mistake() -> Iterator[None]:
    """A param's ParamError (a usage mistake on the command line) as what it is in a request:
    the peer's."""
    try:
        yield
    except ParamError as exc:
        raise SubscriptionError(exc.param, exc.reason) from None


def checked(rate_hz: object, payload_doubles: object, duration_s: object) -> Subscription:
    """A gRPC subscription's numbers, held to the params' ranges; SubscriptionError otherwise."""
    with _peers_mistake():
        return Subscription(
            rate_hz=float(STREAM.param("rate_hz").check(rate_hz)),
            payload_doubles=int(STREAM.param("payload_doubles").check(payload_doubles)),
            duration_s=float(STREAM.param("duration_s").check(duration_s)),
            encoding="protobuf",
        )


def parse_query(query: str) -> Subscription:
    """A subscription's query string; SubscriptionError naming the first wrong or missing
    param."""
    given = dict(parse_qsl(query, keep_blank_values=True))
    values: dict[str, ParamValue] = {}
    for name in _QUERY_PARAMS:
        param = STREAM.param(name)
        if name in given:
            with _peers_mistake():
                values[name] = param.parse(given[name])
        elif name == "encoding":
            values[name] = param.default
        else:
            raise SubscriptionError(name, "missing from the subscription's query")
    return Subscription(
        rate_hz=float(values["rate_hz"]),
        payload_doubles=int(values["payload_doubles"]),
        duration_s=float(values["duration_s"]),
        encoding="cbor" if values["encoding"] == "cbor" else "json",
    )


def resumption(last_event_id: bytes | None, items: int) -> Resumption:
    """Where an SSE subscription of `items` items starts for a request carrying this
    Last-Event-ID (what an EventSource sends when it reconnects: the id of the last event it
    got). None or empty: a new subscription, from item 0. An item's number k: after it, from
    k + 1. END_EVENT_ID: ended. Anything else is SubscriptionError."""
    value = (last_event_id or b"").strip(b" \t")
    if not value:
        return Resumption()
    if value == END_EVENT_ID.encode():
        return Resumption(items, ended=True)
    # bytes.isdigit is ASCII only: no sign, no "_", no other script's digits.
    if value.isdigit() and len(value) <= _MAX_ID_DIGITS and int(value) < items:
        return Resumption(int(value) + 1)
    shown = value.decode(errors="replace")
    shown = repr(shown if len(shown) <= 40 else f"{shown[:40]}...")
    raise SubscriptionError(
        "Last-Event-ID",
        f"{shown} is neither an item of this subscription (0..{items - 1}) "
        f"nor {END_EVENT_ID!r}, the id of its end",
    )
