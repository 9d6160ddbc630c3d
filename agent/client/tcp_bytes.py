"""A TCP connection's bytes on the wire so far, as the kernel counts them (Linux's TCP_INFO):
payload the peer acknowledged and payload received, TLS records and their handshake included,
TCP and IP headers not. HTTP/3's counterpart is its UDP payloads (agent.h3.stack's
TransportCounts), so both protocols count the transport's payload.

`tcpi_bytes_acked` and `tcpi_bytes_received` (RFC 4898's names) are at fixed offsets of
struct tcp_info since Linux 4.1; a kernel whose struct is shorter, or a socket that is gone,
counts None."""

from __future__ import annotations

import socket
import struct

_BYTES_OFFSET = 120  # tcpi_bytes_acked, then tcpi_bytes_received: two u64
_BYTES = struct.Struct("=QQ")
_INFO_LENGTH = _BYTES_OFFSET + _BYTES.size


def tcp_bytes(sock: object) -> tuple[int, int] | None:
    """(sent and acknowledged, received) payload bytes of a TCP socket (a socket.socket, or
    asyncio's TransportSocket around one); None where the kernel cannot tell."""
    getsockopt = getattr(sock, "getsockopt", None)
    if getsockopt is None:
        return None
    try:
        info = getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LENGTH)
    except OSError:
        return None
    if len(info) < _INFO_LENGTH:
        return None
    acked, received = _BYTES.unpack_from(info, _BYTES_OFFSET)
    return int(acked), int(received)
