"""The gRPC service's protobuf messages, declared in code (no generated `_pb2` module, so no
protoc and no generated-code version to keep in step with the runtime), as this .proto would:

    syntax = "proto3";
    package h2iot.stream;
    message SubscribeRequest { double rate_hz = 1; uint32 payload_doubles = 2;
                               double duration_s = 3; }
    message Tune { uint64 seq = 1; int64 t_ns = 2; double value = 3; double error = 4;
                   uint64 dropped = 5; repeated double doubles = 6; }  // packed
    service Telemetry { rpc Subscribe(SubscribeRequest) returns (stream Tune); }

The server's counts at the end travel in the trailers, beside grpc-status (`TRAILER_*`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from agent.workloads.stream.errors import ItemError
from agent.workloads.stream.item import Tune
from agent.workloads.stream.subscription import Subscription, checked

PACKAGE = "h2iot.stream"
SUBSCRIBE_PATH = f"/{PACKAGE}.Telemetry/Subscribe"
TRAILER_PUBLISHED = b"h2iot-items-published"
TRAILER_DROPPED = b"h2iot-items-dropped"

_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="h2iot/stream.proto", package=PACKAGE, syntax="proto3"
    )
    declared = {
        "SubscribeRequest": (
            ("rate_hz", _F.TYPE_DOUBLE),
            ("payload_doubles", _F.TYPE_UINT32),
            ("duration_s", _F.TYPE_DOUBLE),
        ),
        "Tune": (
            ("seq", _F.TYPE_UINT64),
            ("t_ns", _F.TYPE_INT64),
            ("value", _F.TYPE_DOUBLE),
            ("error", _F.TYPE_DOUBLE),
            ("dropped", _F.TYPE_UINT64),
            ("doubles", _F.TYPE_DOUBLE),
        ),
    }
    for message_name, fields in declared.items():
        message = proto.message_type.add(name=message_name)
        for number, (field_name, field_type) in enumerate(fields, 1):
            repeated = field_name == "doubles"
            message.field.add(
                name=field_name,
                number=number,
                type=field_type,
                label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL,
            )
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
_SUBSCRIBE = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName(f"{PACKAGE}.SubscribeRequest")
)
_TUNE = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.Tune"))


class _SubscribeFields(Protocol):
    rate_hz: float
    payload_doubles: int
    duration_s: float


class _TuneFields(Protocol):
    seq: int
    t_ns: int
    value: float
    error: float
    dropped: int
    doubles: Sequence[float]


def _parse(cls: type[Message], body: bytes, what: str) -> Message:
    try:
        return cls.FromString(body)
    except DecodeError as exc:
        raise ItemError(f"not a protobuf {what}: {exc}") from None


def _serialize(cls: type[Message], **fields: object) -> bytes:
    # types-protobuf declares Message() without fields; a message class made from a
    # descriptor takes them as keywords, as a generated one does.
    build: Callable[..., Message] = cls
    return build(**fields).SerializeToString()


def encode_subscription(subscription: Subscription) -> bytes:
    return _serialize(
        _SUBSCRIBE,
        rate_hz=subscription.rate_hz,
        payload_doubles=subscription.payload_doubles,
        duration_s=subscription.duration_s,
    )


def decode_subscription(body: bytes) -> Subscription:
    """The request: ItemError if it is not a protobuf SubscribeRequest, SubscriptionError if
    its values are outside the params' ranges."""
    fields = cast(_SubscribeFields, _parse(_SUBSCRIBE, body, "SubscribeRequest"))
    return checked(fields.rate_hz, fields.payload_doubles, fields.duration_s)


def encode_tune(item: Tune) -> bytes:
    return _serialize(
        _TUNE,
        seq=item.seq,
        t_ns=item.t_publish_ns,
        value=item.value,
        error=item.error,
        dropped=item.dropped,
        doubles=item.doubles,
    )


def decode_tune(body: bytes) -> Tune:
    fields = cast(_TuneFields, _parse(_TUNE, body, "Tune"))
    return Tune(
        fields.seq,
        fields.t_ns,
        fields.value,
        fields.error,
        fields.dropped,
        array("d", fields.doubles),
    )
