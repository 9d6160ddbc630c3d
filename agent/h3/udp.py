"""A QUIC endpoint's UDP socket and the node's UDP drop counter.

Loopback's default socket buffers (net.core.rmem_default, 208 KiB) overflow under a window of
1 MiB: the kernel drops datagrams, QUIC retransmits them, and that self-inflicted loss would be
measured as the protocol's cost. So every socket asks for `buffer_bytes` each way (raising
net.core.rmem_max / wmem_max first where the node lets us), records what the kernel granted,
and each trial records the node's Udp RcvbufErrors over it (/proc/net/snmp).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BUFFER_BYTES = 4 * 2**20
SNMP = Path("/proc/net/snmp")
_SYSCTL = Path("/proc/sys/net/core")


def udp_counters(text: str) -> dict[str, int]:
    """The `Udp:` row of /proc/net/snmp as {name: value}; {} where it has none."""
    rows = [line.split()[1:] for line in text.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        return {}
    names, values = rows[0], rows[1]
    return {name: int(value) for name, value in zip(names, values, strict=False)}


def rcvbuf_errors(snmp: Path = SNMP) -> int | None:
    """The node's UDP receive-buffer drops since boot; None where the kernel does not say."""
    try:
        return udp_counters(snmp.read_text()).get("RcvbufErrors")
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
