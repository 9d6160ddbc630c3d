"""The qh3 server's anti-amplification accounting, and the server options that fix it.

RFC 9000 section 8.1: before a client's address is validated, a server may send at most three
times the bytes it received, counting whole UDP datagrams. qh3 2.1.0's Python layer splits a
datagram into packets and hands its native core each packet's bytes; the core credits those,
so padding a client puts after its Initial packet (aioquic pads a 518-byte Initial with zeros to
1200 bytes) is not credited. The allowance then runs out part-way through the server's first
flight, and when what is left is at least 29 bytes but less than a packet's header, tag and
first frame, the core's packet builder raises "packet builder capacity exhausted" out of
poll_transmit and the connection dies (2-4 times per page fetch against aioquic's client; never
against qh3's or ngtcp2's, which pad inside the packet). Measured and checked on 2026-12-05
(agent/README.md, "HTTP/3").

Three fixes, each of which removes the failure on its own; the server takes them as options:
- `count_padding` (on by default): a packet followed only by zero bytes to the datagram's end
  is handed to the core with them, so the datagram is credited whole, as RFC 9000 says (the
  core skips the zeros when it parses).
- `capacity_as_blocked` (on by default): the builder's exhaustion means what it is, "no room
  to send now": the poll ends with the datagrams already built (agent.h3.stack.CoreTap) and
  resumes when more bytes arrive, instead of ending the connection.
- `retry` (off by default): validate every client's address with a Retry first (RFC 9000
  section 8.1.2), which lifts the limit; it costs every connection one more round trip, which
  a sweep would measure as HTTP/3's, so it is opt-in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import qh3.quic.connection as qh3_connection

_installed = False


@dataclass(frozen=True)
class AmplificationFixes:
    count_padding: bool = True
    capacity_as_blocked: bool = True
    retry: bool = False

    def to_dict(self) -> dict[str, bool]:
        return {
            "count_padding": self.count_padding,
            "capacity_as_blocked": self.capacity_as_blocked,
            "retry": self.retry,
        }


def packet_end_with_padding(datagram: bytes, packet_end: int) -> int:
    """Where a packet ending at `packet_end` ends once the zeros after it to the datagram's end
    count as its own (the datagram's end), else `packet_end`. Pure."""
    if 0 < packet_end < len(datagram) and not any(memoryview(datagram)[packet_end:]):
        return len(datagram)
    return packet_end


def install_padding_credit() -> None:
    """Make qh3's datagram splitter hand trailing zero padding to the core with its packet.
    Process-wide (qh3 splits in a module function) and idempotent; harmless to a client in the
    same process (it is what RFC 9000 asks of every endpoint)."""
    global _installed  # noqa: PLW0603  (one wrapper per process)
    if _installed:
        return
    pull = qh3_connection._pull_quic_header  # type: ignore[attr-defined]

    def pull_crediting_padding(data: bytes, offset: int, cid_length: int) -> Any:
        header = pull(data, offset, cid_length)
        end = packet_end_with_padding(data, header[9])
        return header if end == header[9] else (*header[:9], end, *header[10:])

    qh3_connection._pull_quic_header = pull_crediting_padding  # type: ignore[attr-defined,assignment]
    _installed = True
