"""The calibration probe: CPU-bound work standing for what a node's agent does.

One unit of work is one HTTP/2 request and response between two in-memory h2 connections (a
HEADERS frame each way, HPACK-coded with a path that changes every time so the encoder does
real work, 16 KiB of DATA in 4 KiB frames, WINDOW_UPDATEs back) and a plain hash loop (32-bit
FNV-1a in Python over 1 KiB, the interpreter-bound part of an agent). No sockets: only the CPU
is measured.

Run as `python -m controller.device.probe --seconds S [--wait]`: with `--wait` it imports and
warms up first, prints `ready`, and starts timing when a line arrives on stdin (so the caller
can move it into a cgroup in between). Prints one JSON line: `units`, `wall_s`, `cpu_s`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, RequestReceived

_BODY = bytes(range(256)) * 64  # 16 KiB
_CHUNK_BYTES = 4096
_HASHED = bytes(range(256)) * 4  # 1 KiB
_FNV_OFFSET, _FNV_PRIME = 0x811C9DC5, 0x01000193
_WARM_UP_UNITS = 20


class _Pair:
    """A client and a server connection joined back to back."""

    def __init__(self) -> None:
        self.client = H2Connection(H2Configuration(client_side=True))
        self.server = H2Connection(H2Configuration(client_side=False))
        self.client.initiate_connection()
        self.server.initiate_connection()
        self._pump()
        self.count = 0

    def _pump(self) -> list[object]:
        events: list[object] = []
        while True:
            to_server = self.client.data_to_send()
            to_client = self.server.data_to_send()
            if not to_server and not to_client:
                return events
            if to_server:
                events += self.server.receive_data(to_server)
            if to_client:
                events += self.client.receive_data(to_client)

    def exchange(self) -> int:
        """One request and response; the body bytes the client received."""
        self.count += 1
        stream = self.client.get_next_available_stream_id()
        path = f"/assets/img-{self.count}.jpg?v={self.count * 7919}"
        self.client.send_headers(
            stream,
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "node"),
                (":path", path),
                ("user-agent", "h2iot-probe"),
                ("accept", "*/*"),
            ],
            end_stream=True,
        )
        received = 0
        for event in self._pump():
            if isinstance(event, RequestReceived):
                self._respond(event.stream_id)
        for event in self._pump():
            if isinstance(event, DataReceived):
                received += len(event.data)
                self.client.acknowledge_received_data(event.flow_controlled_length, stream)
        self._pump()
        return received

    def _respond(self, stream: int) -> None:
        self.server.send_headers(
            stream,
            [
                (":status", "200"),
                ("content-type", "image/jpeg"),
                ("content-length", str(len(_BODY))),
                ("etag", f'"{self.count:x}"'),
            ],
        )
        for start in range(0, len(_BODY), _CHUNK_BYTES):
            last = start + _CHUNK_BYTES >= len(_BODY)
            self.server.send_data(stream, _BODY[start : start + _CHUNK_BYTES], end_stream=last)


def fnv1a(data: bytes) -> int:
    value = _FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value


def run(seconds: float, ready: bool = False) -> dict[str, float]:
    """Units of work done in `seconds` of wall time, and the CPU time they took."""
    pair = _Pair()
    for _ in range(_WARM_UP_UNITS):
        pair.exchange()
        fnv1a(_HASHED)
    if ready:
        print("ready", flush=True)
        sys.stdin.readline()
    units = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        pair.exchange()
        fnv1a(_HASHED)
        units += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    return {"units": units, "wall_s": now - start, "cpu_s": time.process_time() - cpu_start}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.device.probe")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--wait", action="store_true", help="print ready, start on a stdin line")
    args = parser.parse_args()
    print(json.dumps(run(args.seconds, ready=args.wait)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
