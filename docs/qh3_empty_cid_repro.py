"""Minimal reproduction, for qh3 upstream: a qh3 server cannot complete a handshake with a
client whose Source Connection ID is empty (RFC 9000 sections 5.1 and 7.2 allow it; Chromium's
QUIC client does it). qh3 alone, in memory, no network; docs/qh3-chromium.md tells the story.

    pip install qh3==2.1.0
    python qh3_empty_cid_repro.py CERT.pem KEY.pem

Prints what the server sent back and how it closed the connection. With qh3 2.1.0:

    server closed: 8 'initial_source_connection_id does not match'
    server replies addressed to: ['<the client's first 8-byte Destination Connection ID>']
    client's own connection ID: ''

Expected: no close (a ServerHello instead), and replies addressed to the client's ID, ''.
"""

from __future__ import annotations

import os
import sys

from qh3.h3.connection import H3_ALPN
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection


def main(cert: str, key: str) -> None:
    client_config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    client_config.connection_id_length = 0  # the client's own ID is empty, as Chromium's
    client = QuicConnection(configuration=client_config)
    # qh3's client makes its first Destination Connection ID as long as its own; a client with
    # an empty ID still sends at least 8 bytes there (RFC 9000 section 7.2), as Chromium does.
    client._original_destination_connection_id = os.urandom(8)
    client.connect(("127.0.0.1", 4433), now=0.0)

    server_config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    server_config.load_cert_chain(cert, key)
    server = QuicConnection(
        configuration=server_config,
        original_destination_connection_id=client.original_destination_connection_id,
    )
    for datagram, _ in client.datagrams_to_send(now=0.0):
        server.receive_datagram(datagram, ("127.0.0.1", 50000), now=0.0)
    replies = [datagram for datagram, _ in server.datagrams_to_send(now=0.0)]

    closed = server._close_event
    print(
        "server closed:",
        None if closed is None else f"{closed.error_code} {closed.reason_phrase!r}",
    )
    # A long header: flags (1 byte), version (4), DCID length (1), DCID.
    print("server replies addressed to:", sorted({r[6 : 6 + r[5]].hex() for r in replies}))
    print("client's own connection ID:", repr(client.host_cid.hex()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
