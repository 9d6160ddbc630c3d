"""A grpcio server (the C core) for the Telemetry service, run in the test's process: our
client against it checks our gRPC framing, trailers and status handling against grpcio's.

Its Subscribe streams the items asked for, each a Tune from the protobuf package, with the
counts in the trailing metadata; `oversize_doubles` > 0 makes the second item that large
instead (our client must refuse it as RESOURCE_EXHAUSTED), `abort_code` ends the call with
that status after the first item, `published_trailer` replaces the count of items published
in the trailers."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass

import grpc

from agent.workloads.stream import proto
from agent.workloads.stream.item import DoublePool


@dataclass
class Behaviour:
    oversize_doubles: int = 0
    abort_code: grpc.StatusCode | None = None
    published_trailer: str | None = None


@contextmanager
def grpc_server(behaviour: Behaviour) -> Iterator[int]:
    """The server's port while it runs."""
    pool = DoublePool(seed=1)

    def subscribe(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        asked = proto.decode_subscription(request)
        items = max(1, math.ceil(asked.duration_s * asked.rate_hz - 1e-9))
        for seq in range(items):
            doubles = asked.payload_doubles
            if seq == 1 and behaviour.oversize_doubles:
                doubles = behaviour.oversize_doubles
            yield proto.encode_tune(pool.item(seq, time.time_ns(), 0, doubles))
            if behaviour.abort_code is not None:
                context.abort(behaviour.abort_code, "the test server gives up")
            time.sleep(1.0 / asked.rate_hz)
        context.set_trailing_metadata(
            (
                (proto.TRAILER_PUBLISHED.decode(), behaviour.published_trailer or str(items)),
                (proto.TRAILER_DROPPED.decode(), "0"),
            )
        )

    handler = grpc.method_handlers_generic_handler(
        f"{proto.PACKAGE}.Telemetry",
        {"Subscribe": grpc.unary_stream_rpc_method_handler(subscribe)},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(grace=None)
