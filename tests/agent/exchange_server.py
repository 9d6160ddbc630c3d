"""A server process for the exchange tests: our server (agent.server.app.serve) with a handler of
the tests' own that answers every path through a `ServerExchange`, no workload involved.

Run as `python tests/agent/exchange_server.py [--setting NAME=VALUE ...] [--trial-log FILE]`;
it listens on a free loopback port and names it in `serve`'s JSON listening line on stderr,
where its log goes too.

Paths:
- `POST|PUT /echo`: the whole body back, with its length and sha256 in headers; logs what
  `receive()` raised (ExchangeClosed) when the peer resets the stream.
- `POST /limited`: as /echo, but `body_limit_bytes` is LIMITED_BYTES (over it: 413).
- `POST /read-limit`: `read_body(LIMITED_BYTES)` inside the handler.
- `GET /stream?chunks=N&size=S[&length=1]`: N chunks of S bytes, then trailers with their
  sha256 (with `length`, content-length too).
- `POST /count`: reads the body chunk by chunk with `receive()`, answers the chunk count (a
  header) and the bytes (the body).
- `POST /hold`: headers and 4 bytes, then nothing (the body is never read) until the stream
  closes.
- `GET /flood?size=S`: 64 x S response bytes, waiting in `drain(S)` whenever more than 4 S
  are buffered; trailers give the bytes sent, the highest buffered_bytes and the waits.
- `GET /raise`: the handler raises; `GET /forget`: it returns without ending the stream.
- `CONNECT /ws` with `:protocol: websocket`: every chunk received is sent back; END_STREAM
  ends the response with trailers.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from agent.h2.settings import parse_settings
from agent.server.app import ServerOptions, serve
from agent.server.exchange import ExchangeClosed, ServerExchange
from agent.server.handler import NOT_FOUND, Reply, Streamed
from agent.server.request import Request

LIMITED_BYTES = 1000
log = logging.getLogger("h2iot.test-exchange")


def _query(request: Request) -> dict[str, int]:
    return {k: int(v[0]) for k, v in parse_qs(urlsplit(request.path).query).items()}


async def echo(exchange: ServerExchange) -> None:
    chunks = []
    try:
        while (chunk := await exchange.receive()) is not None:
            chunks.append(chunk)
    except ExchangeClosed as exc:
        log.warning("echo: receive raised %s: %s", type(exc).__name__, exc)
        raise
    body = b"".join(chunks)
    digest = hashlib.sha256(body).hexdigest().encode()
    exchange.send_headers(
        200,
        [
            (b"content-length", str(len(body)).encode()),
            (b"x-body-bytes", str(len(body)).encode()),
            (b"x-body-sha256", digest),
        ],
    )
    exchange.send(body, end_stream=True)


async def read_limit(exchange: ServerExchange) -> None:
    body = await exchange.read_body(LIMITED_BYTES)
    exchange.send_headers(200)
    exchange.send(body, end_stream=True)


async def stream(exchange: ServerExchange) -> None:
    query = _query(exchange.request)
    chunks, size = query.get("chunks", 4), query.get("size", 1000)
    digest = hashlib.sha256()
    headers = [(b"content-type", b"application/octet-stream")]
    if query.get("length"):
        headers.append((b"content-length", str(chunks * size).encode()))
    exchange.send_headers(200, headers)
    for index in range(chunks):
        chunk = bytes([index % 256]) * size
        digest.update(chunk)
        exchange.send(chunk)
        await exchange.drain(64 * 1024)
    exchange.send_trailers([(b"x-sha256", digest.hexdigest().encode()), (b"x-done", b"yes")])


async def count(exchange: ServerExchange) -> None:
    chunks = total = 0
    while (chunk := await exchange.receive()) is not None:
        chunks += 1
        total += len(chunk)
    exchange.send_headers(200, [(b"x-chunks", str(chunks).encode())])
    exchange.send(str(total).encode(), end_stream=True)


async def hold(exchange: ServerExchange) -> None:
    exchange.send_headers(200)
    exchange.send(b"held")
    await exchange.wait_closed()


async def flood(exchange: ServerExchange) -> None:
    size = _query(exchange.request).get("size", 4096)
    chunk = b"f" * size
    exchange.send_headers(200)
    highest = waits = 0
    sent = 0
    for _ in range(64):
        exchange.send(chunk)
        sent += size
        highest = max(highest, exchange.buffered_bytes)
        if exchange.buffered_bytes > 4 * size:
            waits += 1
            await exchange.drain(size)
    exchange.send_trailers(
        [
            (b"x-sent", str(sent).encode()),
            (b"x-highest-buffered", str(highest).encode()),
            (b"x-drain-waits", str(waits).encode()),
        ]
    )


async def fail(exchange: ServerExchange) -> None:
    raise RuntimeError("the test handler fails on purpose")


async def forget(exchange: ServerExchange) -> None:
    exchange.send_headers(200)


async def websocket(exchange: ServerExchange) -> None:
    exchange.send_headers(200, [(b"sec-websocket-protocol", b"echo")])
    echoed = 0
    while (chunk := await exchange.receive()) is not None:
        echoed += len(chunk)
        exchange.send(chunk)
    exchange.send_trailers([(b"x-echoed", str(echoed).encode())])


ROUTES = {
    (b"POST", "/echo"): Streamed(echo),
    (b"PUT", "/echo"): Streamed(echo),
    (b"POST", "/limited"): Streamed(echo, body_limit_bytes=LIMITED_BYTES),
    (b"POST", "/read-limit"): Streamed(read_limit),
    (b"GET", "/stream"): Streamed(stream),
    (b"POST", "/count"): Streamed(count),
    (b"POST", "/hold"): Streamed(hold),
    (b"GET", "/flood"): Streamed(flood),
    (b"GET", "/raise"): Streamed(fail),
    (b"GET", "/forget"): Streamed(forget),
}


class ExchangeTestHandler:
    def __init__(self) -> None:
        self.extra_settings = {"enable_connect_protocol": 1}

    def handle(self, request: Request) -> Reply | Streamed:
        if request.method == b"CONNECT":
            if request.headers.get(b":protocol") == b"websocket":
                return Streamed(websocket)
            return Reply(400)
        if request.path == "/plain":
            return Reply(200, body=memoryview(b"plain reply"))
        route = ROUTES.get((request.method, urlsplit(request.path).path))
        return route if route is not None else NOT_FOUND


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--setting", action="append", default=[])
    parser.add_argument("--trial-log", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    options = ServerOptions(
        port=0,
        settings=parse_settings(args.setting),
        trial_log=args.trial_log,
        workload="exchange",
    )
    return asyncio.run(serve(options, ExchangeTestHandler()))


if __name__ == "__main__":
    sys.exit(main())
