"""hypercorn as an RFC 8441 peer for the exchange tests: an ASGI app whose WebSocket endpoint
echoes every message, served over cleartext HTTP/2 (prior knowledge) on a free loopback port.

Run as `python tests/agent/hypercorn_ws_server.py`; it prints the port on stdout once it
listens (the socket is bound here, port 0, and handed to hypercorn as a file descriptor).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

Message = dict[str, Any]


async def app(
    scope: Message,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "websocket":
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while (message := await receive())["type"] == "websocket.receive":
        await send(
            {"type": "websocket.send", "bytes": message.get("bytes"), "text": message.get("text")}
        )


def main() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # a client may connect as soon as the port is printed
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    print(sock.getsockname()[1], flush=True)
    asyncio.run(serve(app, config))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
