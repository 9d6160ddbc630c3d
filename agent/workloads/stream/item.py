"""Tune items and their encodings (JSON, CBOR), pure.

An item is what the reference's control-system server published: a sequence number, the
publish time, a measured value with its error, and `P` random doubles. Its publish time is the
server's wall clock (CLOCK_REALTIME, ns): the client subtracts it from its own wall clock, so
latency is exact on one host and otherwise off by the nodes' clock offset (which the controller
measures and records).

The doubles are slices of one pool of random doubles, drawn once per size, at an offset that
moves with the sequence number: each item carries different random values without paying a
random number generator per double inside the timed trial (what the study measures is the
transport and the encoding, not `random.random`).

The end of a stream carries the server's own counts (`StreamEnd`): items published and dropped.
"""

from __future__ import annotations

import base64
import json
import random
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import cbor2

from agent.workloads.stream.errors import ItemError

Encoding = Literal["json", "cbor"]
# The largest count or stamp an item carries (protobuf's uint64).
MAX_COUNT = 2**64 - 1
# Offsets cycle through this many positions: a prime, so no payload size lines items up.
_OFFSETS = 1021
# An item's value and error come from the pool too, before its payload.
_ITEM_HEAD = 2


@dataclass(frozen=True)
class Tune:
    seq: int
    t_publish_ns: int  # the server's wall clock when it published the item
    value: float
    error: float
    dropped: int  # items the server had dropped for this subscriber before this one
    doubles: array[float]


@dataclass(frozen=True)
class StreamEnd:
    """The server's counts at the end of a subscription."""

    published: int  # items published, dropped ones included (sequence numbers 0..published-1)
    dropped: int


class DoublePool:
    """Random doubles in [0, 1), drawn once up to the largest size asked for."""

    def __init__(self, seed: int = 0x7E57) -> None:
        self._random = random.Random(seed)
        self._doubles = array("d")

    def reserve(self, payload_doubles: int) -> None:
        """Draw now what items of `payload_doubles` doubles need (2M take about 0.5 s), so
        that no item's publication pays for it."""
        self._grow(payload_doubles + _ITEM_HEAD)

    def _grow(self, count: int) -> None:
        needed = count + _OFFSETS
        if len(self._doubles) < needed:
            draw = self._random.random
            self._doubles.extend(draw() for _ in range(needed - len(self._doubles)))

    def doubles(self, seq: int, count: int) -> array[float]:
        """`count` doubles for item `seq`: a slice (a copy) of the pool."""
        self._grow(count)
        offset = seq % _OFFSETS
        return self._doubles[offset : offset + count]

    def item(self, seq: int, t_publish_ns: int, dropped: int, count: int) -> Tune:
        doubles = self.doubles(seq, count + _ITEM_HEAD)
        return Tune(seq, t_publish_ns, 100.0 * doubles[0], doubles[1], dropped, doubles[2:])


def _as_dict(item: Tune) -> dict[str, object]:
    return {
        "seq": item.seq,
        "t_ns": item.t_publish_ns,
        "value": item.value,
        "error": item.error,
        "dropped": item.dropped,
        "doubles": item.doubles.tolist(),
    }


def encode_item(item: Tune, encoding: Encoding) -> bytes:
    """JSON (UTF-8, one line: it fits an SSE data line as it is) or CBOR."""
    if encoding == "json":
        return json.dumps(_as_dict(item), separators=(",", ":")).encode()
    return cbor2.dumps(_as_dict(item))


def encode_end(end: StreamEnd, encoding: Encoding) -> bytes:
    fields = {"published": end.published, "dropped": end.dropped}
    if encoding == "json":
        return json.dumps(fields, separators=(",", ":")).encode()
    return cbor2.dumps(fields)


def sse_data(body: bytes, encoding: Encoding) -> str:
    """An encoded item as SSE's text: JSON as it is, CBOR in base64."""
    return body.decode() if encoding == "json" else base64.b64encode(body).decode("ascii")


def sse_body(data: str, encoding: Encoding) -> bytes:
    """The inverse of `sse_data`; ItemError if it is not that."""
    if encoding == "json":
        return data.encode()
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise ItemError(f"SSE data is not base64 (CBOR items are): {data[:40]!r}") from None


def _load(body: bytes, encoding: Encoding) -> Mapping[str, object]:
    try:
        loaded = json.loads(body) if encoding == "json" else cbor2.loads(body)
    except (ValueError, RecursionError, cbor2.CBORDecodeError) as exc:
        # json's decoder recurses once per level of nesting: "[[[[..." within one item's
        # bound is deep enough to exhaust the stack (cbor2 stops at 400 levels itself).
        raise ItemError(f"not a {encoding} item: {exc}") from None
    if not isinstance(loaded, dict):
        raise ItemError(f"a {encoding} item must be a map, got {type(loaded).__name__}")
    return loaded


def _int(fields: Mapping[str, object], name: str, what: str) -> int:
    """A count or stamp as protobuf's 64 bits hold it: JSON and CBOR integers have no bound,
    and one past a double's range breaks the arithmetic that follows (a latency in s)."""
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ItemError(f"{what}: {name!r} must be an integer in 0..2^64-1, got {_shown(value)}")
    return value


def _float(fields: Mapping[str, object], name: str, what: str) -> float:
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ItemError(f"{what}: {name!r} must be a number, got {_shown(value)}")
    try:
        return float(value)
    except OverflowError:  # an integer past 2^1024
        raise ItemError(
            f"{what}: {name!r} must be a number within a double's range, got {_shown(value)}"
        ) from None


def _shown(value: object) -> str:
    """A peer's value in a one-line message, however long it is."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"


def decode_message(body: bytes, encoding: Encoding) -> Tune | StreamEnd:
    """An item or the stream's end, checked field by field; ItemError naming the field."""
    fields = _load(body, encoding)
    if "seq" not in fields:
        what = "the stream's end"
        return StreamEnd(_int(fields, "published", what), _int(fields, "dropped", what))
    seq = _int(fields, "seq", "an item")
    what = f"item {seq}"
    listed = fields.get("doubles")
    try:
        if not isinstance(listed, list):
            raise TypeError
        doubles = array("d", listed)  # checks every element at C speed
    except (TypeError, OverflowError):  # OverflowError: an integer no double holds
        raise ItemError(f"{what}: 'doubles' must be a list of numbers") from None
    return Tune(
        seq,
        _int(fields, "t_ns", what),
        _float(fields, "value", what),
        _float(fields, "error", what),
        _int(fields, "dropped", what),
        doubles,
    )


def decode_item(body: bytes, encoding: Encoding) -> Tune:
    """A message that must be an item (polling: every answer is one)."""
    message = decode_message(body, encoding)
    if not isinstance(message, Tune):
        raise ItemError("expected an item, got the stream's end")
    return message
