"""A QUIC endpoint's UDP socket, the client's transport on it, and the node's UDP drop counter.

Loopback's default socket buffers (net.core.rmem_default, 208 KiB) overflow under a window of
1 MiB: the kernel drops datagrams, QUIC retransmits them, and that self-inflicted loss would be
measured as the protocol's cost. So every socket asks for `buffer_bytes` each way (raising
net.core.rmem_max / wmem_max first where the node lets us), records what the kernel granted,
and each trial records the node's Udp RcvbufErrors over it (/proc/net/snmp).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qh3.asyncio._transport import (
    OptimizedDatagramTransport,
    create_optimized_datagram_transport,
    enable_gro,
    has_gso,
)

from agent.kernel_counters import parse_snmp

DEFAULT_BUFFER_BYTES = 4 * 2**20
SNMP = Path("/proc/net/snmp")
_SYSCTL = Path("/proc/sys/net/core")


def rcvbuf_errors(snmp: Path = SNMP) -> int | None:
    """The node's UDP receive-buffer drops since boot; None where the kernel does not say."""
    try:
        return parse_snmp(snmp.read_text()).get("Udp", {}).get("RcvbufErrors")
    except OSError:
        return None


@dataclass(frozen=True)
class SocketBuffers:
    """What was asked and what the kernel granted (it reports twice what it keeps for its
    bookkeeping; recorded as reported), and whether the node's maxima were raised."""

    asked_bytes: int
    rcvbuf_bytes: int
    sndbuf_bytes: int
    raised_max: bool

    def to_dict(self) -> dict[str, int | bool]:
        return {
            "asked_bytes": self.asked_bytes,
            "rcvbuf_bytes": self.rcvbuf_bytes,
            "sndbuf_bytes": self.sndbuf_bytes,
            "raised_max": self.raised_max,
        }


def raise_maxima(wanted: int, sysctl: Path = _SYSCTL) -> bool:
    """net.core.rmem_max and wmem_max to at least `wanted` where they are lower and we may
    write them (root on the node); whether both are at least `wanted` now."""
    enough = True
    for name in ("rmem_max", "wmem_max"):
        path = sysctl / name
        try:
            if int(path.read_text()) < wanted:
                path.write_text(str(wanted))
        except (OSError, ValueError):
            enough = False
    return enough


def udp_socket(
    host: str, port: int, buffer_bytes: int = DEFAULT_BUFFER_BYTES
) -> tuple[socket.socket, SocketBuffers]:
    """A UDP socket bound to (`host`, `port`; 0 picks one) with its buffers set."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        raised = raise_maxima(buffer_bytes)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    buffers = SocketBuffers(
        buffer_bytes,
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        raised,
    )
    return sock, buffers


# quinn-udp's batch read (qh3 2.1.0's UdpSocketState.recv) takes at most this many messages a
# call; each gives one segment or more, so a call that returns fewer segments left nothing
# queued.
_RECV_MESSAGES = 32
# Reads per wake-up before the loop's other callbacks run (qh3's transport bounds it too).
_RECV_BURST = 32


class DrainingTransport(OptimizedDatagramTransport):
    """qh3's batched UDP transport (recvmmsg with GRO, sendmsg with GSO), whose read stops at
    the first short batch instead of reading again until a batch comes back empty. Under a
    small window every wake-up finds a datagram or two: the empty read was a second
    recvmmsg per round trip. What arrives after the short read keeps the socket readable, and
    the loop calls again. All that is read in one wake-up goes to the protocol together, per
    sender, as qh3 delivers it."""

    __slots__ = ()

    def _recv_rust(self, state: Any) -> None:
        if not self._protocol_supports_batch:
            super()._recv_rust(state)
            return
        batches, error = self._read(state)
        deliver = self._protocol.datagrams_received  # type: ignore[attr-defined]
        for addr, segments in batches:
            if self._closing:
                return
            deliver(segments, addr)
        if error is not None and not self._closing:
            self._report_error(error)

    def _read(self, state: Any) -> tuple[list[tuple[Any, list[bytes]]], OSError | None]:
        """What is queued, in runs from one sender, and the error that ended the reads."""
        batches: list[tuple[Any, list[bytes]]] = []
        for _ in range(_RECV_BURST):
            try:
                received = state.recv()
            except InterruptedError:
                continue
            except OSError as exc:
                return batches, exc
            for segment, addr in received:
                if batches and batches[-1][0] == addr:
                    batches[-1][1].append(segment)
                else:
                    batches.append((addr, [segment]))
            if len(received) < _RECV_MESSAGES:
                return batches, None
        if not self._closing and not self._paused and self._reader_registered:
            self._loop.call_soon(self._on_readable)  # more is queued: after the others
        return batches, None


async def datagram_transport(
    protocol_factory: Callable[[], asyncio.DatagramProtocol], sock: socket.socket
) -> tuple[asyncio.DatagramTransport, asyncio.DatagramProtocol]:
    """A DrainingTransport on `sock` (bound, connected or not) for the protocol made now;
    qh3's own transport where there is no recvmmsg (not Linux)."""
    loop = asyncio.get_running_loop()
    if sys.platform != "linux":
        return await create_optimized_datagram_transport(loop, protocol_factory, sock)
    gro, gso = enable_gro(sock), has_gso(sock)
    sock.setblocking(False)
    protocol = protocol_factory()
    transport = DrainingTransport(loop, sock, protocol, None, gro, gso, 1280)
    started: asyncio.Future[None] = loop.create_future()
    transport._start(started)
    try:
        await started
    except BaseException:
        transport.abort()
        raise
    return transport, protocol
