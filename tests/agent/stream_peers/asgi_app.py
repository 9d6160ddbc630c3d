"""An ASGI app that publishes tune items the way the stream workload's server does, written
with the standard library's json and hypercorn's own framing, nothing of ours: our client
against it checks our side of SSE and of WebSocket over HTTP/2 (RFC 8441) against another
implementation. Serve it with `hypercorn --bind fd://N tests.agent.stream_peers.asgi_app:app`.

It publishes `rate_hz` x `duration_s` items (at least one) without pacing backpressure, each
with `payload_doubles` doubles, then the counts; under a path that starts `/close-1011/` the
WebSocket closes with that code before its first item instead, and under `/hostile-KIND/` its
first item is one of `HOSTILE`'s, which a client must refuse rather than crash on.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _plan(scope: Scope) -> tuple[int, int, float, int, str]:
    query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
    rate = float(query["rate_hz"])
    items = max(1, math.ceil(float(query["duration_s"]) * rate - 1e-9))
    first = scope["path"].split("/")[1]
    close = int(first.removeprefix("close-")) if first.startswith("close-") else 0
    hostile = first.removeprefix("hostile-") if first.startswith("hostile-") else ""
    return items, int(query["payload_doubles"]), 1.0 / rate, close, hostile


_HUGE = "1" + "0" * 400  # an integer no double holds


def _fields(seq: str, t_ns: str, value: str, doubles: int) -> str:
    listed = ",".join(["0.5"] * doubles)
    return (
        f'{{"seq":{seq},"t_ns":{t_ns},"value":{value},"error":0,"dropped":0,"doubles":[{listed}]}}'
    )


# The first item of a hostile stream, by kind: JSON that is a stack overflow to decode
# recursively, a value no double holds, a publish stamp no clock reaches.
HOSTILE = {
    "nesting": lambda doubles: "[" * 10_000 + "]" * 10_000,
    "value": lambda doubles: _fields("0", "0", _HUGE, doubles),
    "stamp": lambda doubles: _fields("0", _HUGE, "0", doubles),
}


def _item(seq: int, doubles: int, hostile: str = "") -> str:
    if seq == 0 and hostile:
        return HOSTILE[hostile](doubles)
    return json.dumps(
        {
            "seq": seq,
            "t_ns": time.time_ns(),
            "value": random.random(),
            "error": random.random(),
            "dropped": 0,
            "doubles": [random.random() for _ in range(doubles)],
        }
    )


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]  # lifespan.startup, later lifespan.shutdown
            await send({"type": f"{kind}.complete"})
            if kind == "lifespan.shutdown":
                return
    items, doubles, period, close, hostile = _plan(scope)
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        if close:
            await send({"type": "websocket.close", "code": close})
            return
        for seq in range(items):
            await send({"type": "websocket.send", "text": _item(seq, doubles, hostile)})
            await asyncio.sleep(period)
        end = json.dumps({"published": items, "dropped": 0})
        await send({"type": "websocket.send", "text": end})
        await send({"type": "websocket.close", "code": 1000})
        return
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for seq in range(items):
        event = f"id: {seq}\ndata: {_item(seq, doubles, hostile)}\n\n"
        await send({"type": "http.response.body", "body": event.encode(), "more_body": True})
        await asyncio.sleep(period)
    end = json.dumps({"published": items, "dropped": 0})
    await send({"type": "http.response.body", "body": f"event: end\ndata: {end}\n\n".encode()})
