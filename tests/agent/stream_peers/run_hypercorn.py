"""hypercorn serving the test app in this one process (its CLI forks a worker that outlives a
killed parent): `python -m tests.agent.stream_peers.run_hypercorn FD`, FD a listening socket."""

from __future__ import annotations

import asyncio
import sys

from hypercorn.asyncio import serve
from hypercorn.config import Config

from tests.agent.stream_peers.asgi_app import app

if __name__ == "__main__":
    config = Config()
    config.bind = [f"fd://{int(sys.argv[1])}"]
    asyncio.run(serve(app, config))  # type: ignore[arg-type]
