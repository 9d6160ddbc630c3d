"""A hostile client's QUIC handshakes against a server on loopback, sans-IO over blocking
sockets: genuine client Initials never continued (half-open connections), handshakes completed
and then left silent, and garbage shaped as Initials. The first two wait for the server's
answers, so when they return the server has handled what was sent (no sleeping, no rate);
garbage gets no answer, so what is sent after it tells when it was handled."""

from __future__ import annotations

import os
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager

from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection
from qh3.quic.events import HandshakeCompleted

HANG_GUARD_S = 20.0  # a hang guard for one batch, not a timing assertion
_LOOPBACK = "127.0.0.1"
_RECEIVE_BUFFER_BYTES = 4 * 2**20


def _client(port: int) -> QuicConnection:
    config = QuicConfiguration(is_client=True, alpn_protocols=["h3"], verify_mode=ssl.CERT_NONE)
    client = QuicConnection(configuration=config)
    client.connect((_LOOPBACK, port), now=time.monotonic())
    return client


def half_open(port: int, count: int, batch: int = 50) -> int:
    """`count` genuine client Initials (qh3's first datagram, each with its own connection
    IDs), never continued; sent `batch` at a time, each batch once the server has answered
    every Initial of the one before. Returns how many the server answered."""
    answered = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        # Room for a batch's answers (a server's first flight is several datagrams); the
        # kernel grants up to net.core.rmem_max.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER_BYTES)
        sock.bind((_LOOPBACK, 0))
        sock.settimeout(HANG_GUARD_S)
        for start in range(0, count, batch):
            waiting: set[bytes] = set()
            for _ in range(min(batch, count - start)):
                client = _client(port)
                waiting.add(client.host_cid)
                for data, addr in client.datagrams_to_send(now=time.monotonic()):
                    sock.sendto(data, addr)
            while waiting:
                # The server's first datagram to a client is addressed to its connection ID
                # (after the long header's first byte, version and DCID length).
                answer = sock.recv(65536)
                cid = answer[6 : 6 + answer[5]]
                if cid in waiting:
                    waiting.discard(cid)
                    answered += 1
    return answered


@contextmanager
def silent_handshakes(port: int, count: int) -> Iterator[int]:
    """`count` handshakes completed one after another, each on its own socket, then held open
    without another datagram until the block ends. Yields how many completed."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sockets.append(sock)
            sock.settimeout(HANG_GUARD_S)
            client = _client(port)
            while not _completed(client):
                for data, addr in client.datagrams_to_send(now=time.monotonic()):
                    sock.sendto(data, addr)
                answer, addr = sock.recvfrom(65536)
                client.receive_datagram(answer, addr, now=time.monotonic())
            # The client's Handshake-level ACK and FINISHED: the server completes on them.
            for data, addr in client.datagrams_to_send(now=time.monotonic()):
                sock.sendto(data, addr)
        yield len(sockets)
    finally:
        for sock in sockets:
            sock.close()


def _completed(client: QuicConnection) -> bool:
    while (event := client.next_event()) is not None:
        if isinstance(event, HandshakeCompleted):
            return True
    return False


def garbage_initials(port: int, count: int) -> None:
    """`count` datagrams of 1,200 bytes whose long header reads as a QUIC v1 Initial to a new
    connection ID, with random bytes for its protected part (no key opens it), each from its
    own source port."""
    for _ in range(count):
        head = b"\xc3" + (1).to_bytes(4, "big") + b"\x08" + os.urandom(8) + b"\x08" + os.urandom(8)
        head += b"\x00"  # no token
        rest = 1200 - len(head) - 2
        packet = head + (0x4000 | rest).to_bytes(2, "big") + os.urandom(rest)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(packet, (_LOOPBACK, port))
