"""The stream benchmark's anchors: the same publication served by other HTTP/2 stacks.

- `app`: an ASGI app for hypercorn (h2 and wsproto under hypercorn's own event loop and framing)
  serving SSE at /stream/sse and WebSocket over HTTP/2 (RFC 8441) at /stream/ws:
  `python -m hypercorn --bind fd://N stream_anchors:app` from this directory.
- `python stream_anchors.py grpc`: a grpcio server (the C core) for the Telemetry service's
  Subscribe, printing its port on the first line of stdout.

Both make each item exactly as our server does (the stream workload's `DoublePool` slices and
encoders, agent.workloads.stream) and publish it at k / rate_hz after the subscription started,
so what a comparison of CPU per item measures is the HTTP/2 server, its framing and its event
loop, not how the items are made. No backpressure: the benchmark runs below the breakdown.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent import futures
from typing import Any
from urllib.parse import urlsplit

from agent.workloads.stream import proto
from agent.workloads.stream.item import DoublePool, StreamEnd, encode_end, encode_item, sse_data
from agent.workloads.stream.sse import encode_event
from agent.workloads.stream.subscription import (
    SSE_PATH,
    WEBSOCKET_PATH,
    Subscription,
    parse_query,
)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_POOL = DoublePool()


def items_of(subscription: Subscription) -> int:
    return max(1, math.ceil(subscription.duration_s * subscription.rate_hz - 1e-9))


async def _publish(
    subscription: Subscription, emit: Callable[[bytes, int], Awaitable[None]]
) -> int:
    """Each item encoded and handed to `emit` at its due time; the count published."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    count = items_of(subscription)
    for seq in range(count):
        delay = start + seq / subscription.rate_hz - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        item = _POOL.item(seq, time.time_ns(), 0, subscription.payload_doubles)
        await emit(encode_item(item, subscription.encoding), seq)
    return count


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            await send({"type": f"{kind}.complete"})
            if kind == "lifespan.shutdown":
                return
    subscription = parse_query(scope["query_string"].decode())
    encoding = subscription.encoding
    if scope["type"] == "websocket" and urlsplit(scope["path"]).path == WEBSOCKET_PATH:
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})

        async def message(body: bytes, _seq: int) -> None:
            key = "text" if encoding == "json" else "bytes"
            await send({"type": "websocket.send", key: body.decode() if key == "text" else body})

        published = await _publish(subscription, message)
        await message(encode_end(StreamEnd(published, 0), encoding), -1)
        await send({"type": "websocket.close", "code": 1000})
        return
    if scope["type"] != "http" or scope["path"] != SSE_PATH:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})

    async def event(body: bytes, seq: int) -> None:
        data = encode_event(sse_data(body, encoding), event_id=str(seq))
        await send({"type": "http.response.body", "body": data, "more_body": True})

    published = await _publish(subscription, event)
    end = encode_event(sse_data(encode_end(StreamEnd(published, 0), encoding), encoding), "end")
    await send({"type": "http.response.body", "body": end})


def serve_grpc() -> None:
    """A grpcio server for Subscribe on a free port, printed first; runs until killed."""
    import grpc  # noqa: PLC0415  (the test extra's; only this anchor needs it)

    def subscribe(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        subscription = proto.decode_subscription(request)
        start = time.monotonic()
        count = items_of(subscription)
        for seq in range(count):
            delay = start + seq / subscription.rate_hz - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            item = _POOL.item(seq, time.time_ns(), 0, subscription.payload_doubles)
            yield proto.encode_tune(item)
        context.set_trailing_metadata(
            ((proto.TRAILER_PUBLISHED.decode(), str(count)), (proto.TRAILER_DROPPED.decode(), "0"))
        )

    handler = grpc.method_handlers_generic_handler(
        f"{proto.PACKAGE}.Telemetry", {"Subscribe": grpc.unary_stream_rpc_method_handler(subscribe)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    if sys.argv[1:] != ["grpc"]:
        sys.exit("usage: stream_anchors.py grpc")
    serve_grpc()
