"""A userspace delay line between two interfaces, for kernels without netem.

    python -m controller.link.relay --a IF --b IF --delay-us D --stats FILE

Every frame that arrives on one interface leaves on the other `D` microseconds later (a
`DelayLine` per direction): a wire with a fixed one-way delay. Frames are read and written
whole with AF_PACKET sockets, so the ends must send frames no larger than the MTU (offloads
off; `controller.device.netns` does that). It waits in select() with a timer slack of 1 ns:
poll() rounds its timeout up to whole milliseconds, and the default 50 us slack would make every
frame that late. Prints `ready` once both sockets are bound; on SIGTERM or SIGINT it writes
what it carried and how late frames left to FILE as JSON, and exits 0.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from controller.link.delay_line import DelayLine, Lateness

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # our own sends, seen again on the sending socket
PR_SET_TIMERSLACK = 29
SOCKET_BUFFER_BYTES = 4 << 20
IDLE_WAIT_S = 0.2  # without queued frames: how often a stop request is noticed at the latest
MAX_FRAME_BYTES = 65536


@dataclass
class Direction:
    """One way across the relay: what it carried and how late."""

    source: socket.socket
    sink: socket.socket
    line: DelayLine
    lateness: Lateness = field(default_factory=Lateness)
    frames: int = 0
    bytes: int = 0
    max_frame_bytes: int = 0
    send_errors: int = 0

    def receive(self) -> None:
        """Everything waiting on the source socket, into the line."""
        while True:
            try:
                frame, address = self.source.recvfrom(MAX_FRAME_BYTES)
            except BlockingIOError:
                return
            if address[2] == PACKET_OUTGOING:
                continue
            self.frames += 1
            self.bytes += len(frame)
            self.max_frame_bytes = max(self.max_frame_bytes, len(frame))
            self.line.push(frame, time.monotonic_ns())

    def send_due(self) -> None:
        for frame, late_ns in self.line.pop_due(time.monotonic_ns()):
            self.lateness.add(late_ns)
            try:
                self.sink.send(frame)
            except OSError:
                # A full sink queue drops the frame, as a congested wire would.
                self.send_errors += 1

    def facts(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "bytes": self.bytes,
            "max_frame_bytes": self.max_frame_bytes,
            "most_queued": self.line.most_queued,
            "send_errors": self.send_errors,
            "in_flight_at_stop": len(self.line),  # cut off with the wire, never sent
            "lateness_us": asdict(self.lateness.summary()),
        }


def _packet_socket(interface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER_BYTES)
    sock.bind((interface, ETH_P_ALL))
    sock.setblocking(False)
    return sock


def relay(a: str, b: str, delay_ns: int, stop: list[bool]) -> list[Direction]:
    """Carry frames both ways until `stop[0]` is set; the two directions, a->b first."""
    side_a, side_b = _packet_socket(a), _packet_socket(b)
    directions = [
        Direction(side_a, side_b, DelayLine(delay_ns)),
        Direction(side_b, side_a, DelayLine(delay_ns)),
    ]
    by_source = {d.source.fileno(): d for d in directions}
    print("ready", flush=True)
    while not stop[0]:
        for direction in directions:
            direction.send_due()
        dues = [due for d in directions if (due := d.line.next_due_ns()) is not None]
        wait_s = max(0.0, (min(dues) - time.monotonic_ns()) / 1e9) if dues else IDLE_WAIT_S
        try:
            readable, _, _ = select.select(list(by_source), [], [], wait_s)
        except InterruptedError:
            continue
        for fd in readable:
            by_source[fd].receive()
    return directions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.link.relay")
    parser.add_argument("--a", required=True, help="one interface")
    parser.add_argument("--b", required=True, help="the other interface")
    parser.add_argument("--delay-us", type=float, required=True, help="one-way delay")
    parser.add_argument("--stats", type=Path, required=True, help="JSON written on exit")
    args = parser.parse_args(argv)
    stop = [False]

    def request_stop(_signal: int, _frame: FrameType | None) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    started = os.times()
    try:
        directions = relay(args.a, args.b, round(args.delay_us * 1000), stop)
    except OSError as exc:
        print(f"relay: {exc.strerror or exc}", file=sys.stderr)
        return 1
    ended = os.times()
    cpu_s = (ended.user - started.user) + (ended.system - started.system)
    stats = {
        "delay_us": args.delay_us,
        "cpu_s": cpu_s,
        f"{args.a}->{args.b}": directions[0].facts(),
        f"{args.b}->{args.a}": directions[1].facts(),
    }
    args.stats.write_text(json.dumps(stats, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
