"""The event loop a client's trials, or a server, run on: asyncio's own, or uvloop's (libuv;
the `uvloop` extra). The loop is most of what a Python client costs beyond the protocol at
small windows: every round trip is a wake-up, a read, a write and the loop's bookkeeping around
them, so uvloop takes 9-13 % off a page fetch's client CPU (benchmarks/README.md,
client_vs_nghttp.py); on the server it takes most off over TLS, where uvloop's TLS transport
costs less than asyncio's (server_vs_nghttpd.py). asyncio stays the default: uvloop has no
armv7l wheel on PyPI (piwheels has one), and a run keeps the loop its earlier runs had unless
the config asks. The record (a server's listening line) says which loop ran.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from agent.errors import UsageError

EVENT_LOOPS = ("asyncio", "uvloop")
DEFAULT_EVENT_LOOP = "asyncio"

T = TypeVar("T")


def check_event_loop(name: str) -> None:
    """`name` one of EVENT_LOOPS and runnable here, else the one line that says what to do."""
    if name not in EVENT_LOOPS:
        raise UsageError(f"--event-loop {name}: expected one of {', '.join(EVENT_LOOPS)}")
    if name == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise UsageError(
            "--event-loop uvloop needs the agent's uvloop extra: pip install 'h2iot[uvloop]'"
        )


def run_on(name: str, main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`main()` to completion on a new event loop of kind `name` (checked by check_event_loop)."""
    if name == "uvloop":
        import uvloop  # noqa: PLC0415  (the uvloop extra)

        return uvloop.run(main())
    return asyncio.run(main())


def running_loop_name() -> str:
    """The kind of the loop this coroutine runs on: "uvloop" or "asyncio"."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.split(".", 1)[0] == "uvloop" else "asyncio"
