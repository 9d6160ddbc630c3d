"""Benchmark: what one round trip costs an asyncio client on qh3's UDP transport, with no QUIC.

Under a small fixed window a page fetch is a chain of round trips: the server sends a window's
worth (two datagrams at W = 256, as gtlsserver does), the client reads them, grants more and
sends one datagram back. This measures that loop with everything QUIC taken out: the agent's
UDP transport (agent.h3.udp.DrainingTransport, qh3's recvmmsg/GSO transport underneath) in an
asyncio loop, against a blocking echo process that answers each datagram with two. Its CPU per
round trip is the floor under any asyncio client on qh3's transport, to compare with what
ngtcp2's client spends per round trip in all (h3_vs_ngtcp2.py's CPU / round trips).

    .venv/bin/python benchmarks/h3_round_trip_floor.py [--round-trips 20000] [--repeats 3]
        [--reply-delay-us 90]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import sys
import time
from collections.abc import Sequence

from bench_support import pinned

from agent.h3.udp import datagram_transport, udp_socket

REPLY = (b"d" * 160, b"a" * 60)  # a datagram of stream data and a smaller one, as at W = 256
REQUEST = b"m" * 40  # the client's grant and acknowledgement


def _echo(sock: socket.socket, delay_s: float) -> None:
    while True:
        data, addr = sock.recvfrom(2048)
        if data == b"stop":
            return
        # A server's own work before it answers (gtlsserver: ~90 us a round trip at W = 256):
        # without it the reply can beat the client back to epoll, which then never sleeps.
        until = time.perf_counter() + delay_s
        while time.perf_counter() < until:
            pass
        for datagram in REPLY:
            sock.sendto(datagram, addr)


class _RoundTrips(asyncio.DatagramProtocol):
    """Answers every complete reply with the next request until `count` round trips."""

    def __init__(self, count: int, done: asyncio.Future[None]) -> None:
        self.count = count
        self.done = done
        self.pending = len(REPLY)
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.DatagramTransport)
        self.transport = transport

    def datagrams_received(self, data: list[bytes], addr: object) -> None:
        self.pending -= len(data)
        if self.pending > 0:
            return
        self.pending = len(REPLY)
        self.count -= 1
        if self.count == 0:
            self.done.set_result(None)
        elif self.transport is not None:
            self.transport.sendto(REQUEST)


async def _client(port: int, round_trips: int) -> tuple[float, float]:
    """User and system CPU seconds of `round_trips` round trips."""
    sock, _buffers = udp_socket("127.0.0.1", 0)
    sock.connect(("127.0.0.1", port))
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    transport, _protocol = await datagram_transport(lambda: _RoundTrips(round_trips, done), sock)
    before = resource.getrusage(resource.RUSAGE_SELF)
    transport.sendto(REQUEST)
    await done
    after = resource.getrusage(resource.RUSAGE_SELF)
    transport.close()
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--round-trips", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reply-delay-us", type=float, default=90.0)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    args = parser.parse_args(argv)
    echo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    echo.bind(("127.0.0.1", 0))
    port = echo.getsockname()[1]
    with pinned(args.server_core):
        pid = os.fork()
    if pid == 0:
        _echo(echo, args.reply_delay_us / 1e6)
        os._exit(0)
    echo.close()
    users, systems = [], []
    try:
        with pinned(args.client_core):
            for _ in range(args.repeats):
                user, system = asyncio.run(_client(port, args.round_trips))
                users.append(user / args.round_trips * 1e6)
                systems.append(system / args.round_trips * 1e6)
    finally:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stop:
            stop.sendto(b"stop", ("127.0.0.1", port))
        os.waitpid(pid, 0)
    print(
        f"per round trip (median of {args.repeats}): user {statistics.median(users):.1f} us, "
        f"system {statistics.median(systems):.1f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
