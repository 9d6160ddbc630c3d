"""Benchmark: the HTTP/2 server connection's own CPU per page, in-process, without sockets or
an event loop's reads and writes: what is left of a page's server CPU once the kernel and the
loop are taken away (server_vs_nghttpd.py measures the whole).

One `ServerConnection` per page, as a sweep has one connection per page, serving the default
site: it is fed a client's preface, SETTINGS and the page's GETs (with the trial header), then,
round trip by round trip, the WINDOW_UPDATEs a client at window W grants for the DATA frames it
was sent (the stream's bytes back, and the connection's up to W: nghttp's `-w N -W N`), until
every body is out. Only the server's calls are timed (process CPU time). Printed per window:
the fixed part (the connection, the requests through h2, the look-ups, the response headers, the
first frames, the trial's accounting and record), the round trips, and their cost each; best of
`--pages` pages after one unmeasured.

Run from the repository root with the project's venv:
    .venv/bin/python benchmarks/server_in_process.py [--windows 4095,65535] [--pages 10]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_vs_nghttp2 import prepare_site
from h2.settings import SettingCodes

from agent.h2.connection import h2_connection
from agent.h2.fastpath import FRAME_HEADER_BYTES, TYPE_DATA, window_updates
from agent.h2.settings import DEFAULT_INITIAL_WINDOW_SIZE
from agent.server.app import ServerApp, ServerOptions
from agent.server.connection import ServerConnection
from agent.site import load_manifest
from agent.trial_header import TRIAL_HEADER
from agent.trial_log import TrialLog
from agent.workloads.page.files import FileHandler

REPO = Path(__file__).resolve().parent.parent


class _Collecting(asyncio.Transport):
    """Keeps what the server writes."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def write(self, data: Any) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


@dataclass(frozen=True)
class Page:
    fixed_s: float  # connection made, requests received, connection lost
    total_s: float
    round_trips: int


def _give(server: ServerConnection, data: bytes) -> None:
    """`data` as reads of what the server's buffer offers."""
    view = memoryview(data)
    while view:
        buffer = server.get_buffer(-1)
        size = min(len(buffer), len(view))
        buffer[:size] = view[:size]
        view = view[size:]
        server.buffer_updated(size)


def _grants(written: bytes, window: int, connection_window: int) -> tuple[bytes, int, int]:
    """The WINDOW_UPDATEs for every DATA frame in `written`, the body bytes in it and the
    server's connection window after them."""
    grants = bytearray()
    body = 0
    position = 0
    while position + FRAME_HEADER_BYTES <= len(written):
        length = int.from_bytes(written[position : position + 3], "big")
        stream_id = int.from_bytes(written[position + 5 : position + 9], "big") & 0x7FFFFFFF
        if written[position + 3] == TYPE_DATA and length:
            body += length
            connection_window -= length
            connection = max(0, window - connection_window)
            connection_window += connection
            grants += window_updates(stream_id, connection, length)
        position += FRAME_HEADER_BYTES + length
    return bytes(grants), body, connection_window


def serve_page(app: ServerApp, site: Path, window: int, number: int) -> Page:
    manifest = load_manifest(site)
    client = h2_connection(client_side=True, settings={SettingCodes.INITIAL_WINDOW_SIZE: window})
    client.initiate_connection()
    for index, entry in enumerate(manifest.files):
        headers = [(":method", "GET"), (":scheme", "http"), (":authority", "x")]
        headers += [(":path", f"/{entry.path}"), (TRIAL_HEADER, f"page-{number}")]
        client.send_headers(1 + 2 * index, headers, end_stream=True)
    opening = client.data_to_send()
    page_bytes = sum(entry.size_bytes for entry in manifest.files)
    server = ServerConnection(app, number)
    transport = _Collecting()
    start = time.process_time()
    server.connection_made(transport)
    _give(server, opening)
    fixed = time.process_time() - start
    sent = round_trips = 0
    connection_window = DEFAULT_INITIAL_WINDOW_SIZE
    while sent < page_bytes:
        written = bytes(transport.written)
        transport.written.clear()
        grants, body, connection_window = _grants(written, window, connection_window)
        if not grants:
            raise SystemExit(f"server_in_process: stalled after {sent} of {page_bytes} bytes")
        sent += body
        round_trips += 1
        _give(server, grants)
    lost = time.process_time()
    server.connection_lost(None)
    end = time.process_time()
    return Page(fixed + end - lost, end - start, round_trips)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", default="4095,65535", help="bytes, stream and connection")
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--site", type=Path, default=REPO / "data" / "site")
    args = parser.parse_args(argv)
    site = args.site.resolve()
    prepare_site(site)

    async def run() -> None:
        app = ServerApp(ServerOptions(), TrialLog(None, io.StringIO()), FileHandler(site))
        for window in (int(w) for w in args.windows.split(",")):
            serve_page(app, site, window, 0)
            pages = [serve_page(app, site, window, n + 1) for n in range(args.pages)]
            best = min(pages, key=lambda page: page.total_s)
            per_trip_us = 1e6 * (best.total_s - best.fixed_s) / best.round_trips
            print(
                f"W={window}: {1e3 * best.total_s:.1f} ms per page: fixed "
                f"{1e3 * min(p.fixed_s for p in pages):.2f} ms, {best.round_trips} round trips "
                f"at {per_trip_us:.1f} us",
                flush=True,
            )

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
