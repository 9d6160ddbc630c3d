"""A client whose QUIC connection ID is empty, as Chromium's is (agent.h3.empty_cid): qh3 2.1.0's
server never completes its handshake; ours does, in memory, over UDP with the first flight
Chromium sends, and with Chromium itself."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import qh3
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection
from qh3.quic.events import ConnectionTerminated, HandshakeCompleted
from qh3.quic.packet import QuicProtocolVersion

from agent.h3.credit import CreditLedger
from agent.h3.empty_cid import AFFECTED_QH3, initial_keys
from agent.h3.settings import QuicWindows
from agent.h3.stack import TransportCounts, configuration, tap
from agent.site import load_manifest
from tests.agent.chromium_net_log import page_problems, read_net_log
from tests.agent.h3_peers import Credentials, h3_server
from tests.agent.quic_initial import client_initial, crypto_and_close, crypto_frame, long_packets
from tests.agent.servers import RunningServer
from tests.conftest import require_tool

CLIENT = ("127.0.0.1", 50000)
SERVER = ("127.0.0.1", 4433)
HANDSHAKE_FAILURE = "initial_source_connection_id does not match"


@pytest.mark.parametrize(
    ("version", "from_client", "expected"),
    [
        # RFC 9001 appendix A.1 and RFC 9369 appendix A.1, for Destination Connection ID
        # 0x8394c8f03e515708.
        (
            QuicProtocolVersion.VERSION_1,
            True,
            (
                "1f369613dd76d5467730efcbe3b1a22d",
                "fa044b2f42a3fd3b46fb255c",
                "9f50449e04a0e810283a1e9933adedd2",
            ),
        ),
        (
            QuicProtocolVersion.VERSION_1,
            False,
            (
                "cf3a5331653c364c88f0f379b6067e37",
                "0ac1493ca1905853b0bba03e",
                "c206b8d9b9f0f37644430b490eeaa314",
            ),
        ),
        (
            QuicProtocolVersion.VERSION_2,
            True,
            (
                "8b1a0bc121284290a29e0971b5cd045d",
                "91f73e2351d8fa91660e909f",
                "45b95e15235d6f45a6b19cbcb0294ba9",
            ),
        ),
    ],
)
def test_initial_keys_are_the_rfcs_test_vectors(
    version: int, from_client: bool, expected: tuple[str, str, str]
) -> None:
    keys = initial_keys(bytes.fromhex("8394c8f03e515708"), version, from_client=from_client)
    assert tuple(part.hex() for part in keys) == expected


def _empty_cid_client(credentials: Credentials, *versions: int) -> QuicConnection:
    """qh3's client with an empty connection ID and an 8-byte first Destination Connection ID,
    as Chromium's: qh3 makes the latter as long as the former, so it is set by hand (a
    zero-length one would break RFC 9000's 8-byte minimum)."""
    config = configuration(
        QuicWindows(65535, 1 << 20),
        is_client=True,
        idle_timeout_s=5.0,
        ca_file=str(credentials.ca),
        server_name="localhost",
    )
    config.connection_id_length = 0
    if versions:
        config.supported_versions = list(versions)
        config.original_version = QuicProtocolVersion.VERSION_1
    client = QuicConnection(configuration=config)
    client._original_destination_connection_id = os.urandom(8)
    client.connect(SERVER, now=0.0)
    return client


def _server_config(credentials: Credentials) -> QuicConfiguration:
    config = configuration(
        QuicWindows(4096, 1 << 20),
        is_client=False,
        idle_timeout_s=5.0,
        cert=credentials.cert,
        key=credentials.key,
    )
    config.supported_versions = [QuicProtocolVersion.VERSION_1, QuicProtocolVersion.VERSION_2]
    return config


def _handshake(client: QuicConnection, server: QuicConnection) -> tuple[bool, list[bytes]]:
    """Datagrams both ways in memory until neither side has more (at most 10 rounds): whether
    the client completed its handshake, and every datagram the server sent."""
    sent: list[bytes] = []
    completed = False
    now = 0.0
    for _ in range(10):
        now += 0.001
        to_server = [data for data, _ in client.datagrams_to_send(now)]
        for data in to_server:
            server.receive_datagram(data, CLIENT, now)
        to_client = [data for data, _ in server.datagrams_to_send(now)]
        sent += to_client
        for data in to_client:
            client.receive_datagram(data, SERVER, now)
        while (event := client.next_event()) is not None:
            completed |= isinstance(event, HandshakeCompleted)
            assert not isinstance(event, ConnectionTerminated), event
        if not to_server and not to_client:
            break
    return completed, sent


def _long_header_destination_cids(datagrams: list[bytes]) -> set[bytes]:
    return {data[6 : 6 + data[5]] for data in datagrams if data[0] & 0x80}


def _ours(config: QuicConfiguration, client: QuicConnection) -> QuicConnection:
    server = QuicConnection(
        configuration=config,
        original_destination_connection_id=client.original_destination_connection_id,
    )
    return tap(server, CreditLedger(), TransportCounts(), capacity_as_blocked=True)


@pytest.mark.parametrize(
    "versions",
    [(), (QuicProtocolVersion.VERSION_2, QuicProtocolVersion.VERSION_1)],
    ids=["v1", "v1-negotiated-to-v2"],
)
def test_our_server_completes_a_handshake_with_a_client_without_connection_id(
    credentials: Credentials, versions: tuple[int, ...]
) -> None:
    client = _empty_cid_client(credentials, *versions)
    server = _ours(_server_config(credentials), client)
    completed, sent = _handshake(client, server)
    assert completed
    # Every reply is addressed to the client's (empty) ID, as RFC 9000 section 7.2 says.
    assert _long_header_destination_cids(sent) == {b""}
    # The server's own ID is the one the client first sent to.
    assert server.host_cid == client.original_destination_connection_id
    assert client._version == (versions or (QuicProtocolVersion.VERSION_1,))[0]


def test_a_client_with_a_connection_id_is_served_as_before(credentials: Credentials) -> None:
    config = configuration(
        QuicWindows(65535, 1 << 20),
        is_client=True,
        idle_timeout_s=5.0,
        ca_file=str(credentials.ca),
        server_name="localhost",
    )
    client = QuicConnection(configuration=config)
    client.connect(SERVER, now=0.0)
    server = _ours(_server_config(credentials), client)
    host_cid = server.host_cid
    completed, sent = _handshake(client, server)
    assert completed
    assert server.host_cid == host_cid != client.original_destination_connection_id
    assert _long_header_destination_cids(sent) == {client.host_cid}


def _serve_first_flight(
    server: QuicConnection, client: QuicConnection
) -> tuple[list[bytes], str | None]:
    """The client's first flight into `server`: what the server sends back, and why it closed
    the connection (None while open)."""
    for data, _ in client.datagrams_to_send(0.0):
        server.receive_datagram(data, CLIENT, 0.0)
    replies = [data for data, _ in server.datagrams_to_send(0.001)]
    closed = server._close_event  # qh3 keeps it private
    return replies, None if closed is None else closed.reason_phrase


@pytest.mark.skipif(qh3.__version__ not in AFFECTED_QH3, reason="not a known-bad qh3 version")
def test_bare_qh3_fails_a_client_without_connection_id(credentials: Credentials) -> None:
    """The upstream defect, still in the pinned qh3 (docs/qh3-chromium.md): when this fails,
    qh3 has fixed it and agent.h3.empty_cid can go."""
    client = _empty_cid_client(credentials)
    server = QuicConnection(
        configuration=_server_config(credentials),
        original_destination_connection_id=client.original_destination_connection_id,
    )
    replies, closed = _serve_first_flight(server, client)
    assert closed == HANDSHAKE_FAILURE
    # ... in a CONNECTION_CLOSE addressed to an ID the client never had, so it never hears it.
    assert _long_header_destination_cids(replies) == {client.original_destination_connection_id}


def test_our_server_answers_the_same_first_flight_with_a_server_hello(
    credentials: Credentials,
) -> None:
    client = _empty_cid_client(credentials)
    server = _ours(_server_config(credentials), client)
    replies, closed = _serve_first_flight(server, client)
    assert closed is None
    assert _long_header_destination_cids(replies) == {b""}
    assert _server_hello(replies, client.original_destination_connection_id)


def _server_hello(replies: list[bytes], client_destination_cid: bytes) -> bool:
    """Whether the server's Initials start its CRYPTO stream with a ServerHello (type 2) and
    close nothing."""
    for data in replies:
        for packet in long_packets(data, client_destination_cid, from_client=False):
            if packet.payload is None:
                continue
            crypto, close = crypto_and_close(packet.payload)
            assert close is None, close
            if any(offset == 0 and chunk[:1] == b"\x02" for offset, chunk in crypto):
                return True
    return False


def _chromium_first_flight(credentials: Credentials) -> tuple[bytes, list[bytes]]:
    """A first flight in Chromium's shape (its net-log's): an 8-byte Destination Connection ID,
    an empty Source one, a ClientHello too big for one packet whose CRYPTO frames are out of
    order (the first datagram carries the start and the end, the second the middle). The
    ClientHello is qh3's client's, offering an X25519MLKEM768 key share as Chromium's does.
    Returns the Destination Connection ID and the two datagrams."""
    client = _empty_cid_client(credentials)
    destination_cid = client.original_destination_connection_id
    chunks: list[tuple[int, bytes]] = []
    for data, _ in client.datagrams_to_send(0.0):
        for packet in long_packets(data, destination_cid, from_client=True):
            assert packet.payload is not None
            chunks += crypto_and_close(packet.payload)[0]
    hello = b"".join(chunk for _, chunk in sorted(chunks))
    assert len(hello) > 1200
    start, middle = 60, 1050
    first = crypto_frame(0, hello[:start]) + crypto_frame(middle, hello[middle:])
    second = crypto_frame(start, hello[start:middle])
    return destination_cid, [
        client_initial(destination_cid, b"", 1, first, size=1250),
        client_initial(destination_cid, b"", 2, second, size=1250),
    ]


@pytest.fixture(scope="module")
def our_server(
    site: Path, credentials: Credentials, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    with h3_server(site, tmp_path_factory.mktemp("h3-empty-cid"), credentials) as server:
        yield server


def test_our_server_over_udp_answers_chromiums_first_flight(
    our_server: RunningServer, credentials: Credentials
) -> None:
    destination_cid, flight = _chromium_first_flight(credentials)
    replies: list[bytes] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.2)
        for data in flight:
            sock.sendto(data, ("127.0.0.1", our_server.port))
        deadline = time.monotonic() + 5.0  # a hang guard, not a timing assertion
        while not _server_hello(replies, destination_cid):
            assert time.monotonic() < deadline, f"no ServerHello in {len(replies)} datagrams"
            try:
                replies.append(sock.recv(65536))
            except TimeoutError:
                continue
    assert _long_header_destination_cids(replies) == {b""}


def _spki_sha256(cert: Path) -> str:
    """What Chromium's --ignore-certificate-errors-spki-list takes: base64 of the SHA-256 of
    the certificate's SubjectPublicKeyInfo."""
    public_key = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    spki = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


CHROMIUM_TIMEOUT_S = 60.0  # a hang guard: the page loads in about 2 s here


@pytest.mark.parametrize(
    "server_args",
    [
        ("--setting", "initial_window_size=4096"),
        ("--setting", "initial_window_size=65535"),
        # The Retry goes to the empty ID too; the connection then starts from its token.
        ("--quic-retry",),
    ],
    ids=["W4096", "W65535", "retry"],
)
def test_chromium_loads_the_page_from_our_server_over_quic(
    server_args: tuple[str, ...], site: Path, credentials: Credentials, tmp_path: Path
) -> None:
    require_tool("chromium")
    chromium = shutil.which("chromium")
    assert chromium is not None
    net_log = tmp_path / "net-log.json"
    with h3_server(site, tmp_path, credentials, *server_args) as server:
        origin = f"localhost:{server.port}"
        result = subprocess.run(
            [
                chromium,
                "--headless=new",
                "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
                "--disable-gpu",
                "--disable-dev-shm-usage",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--enable-quic",
                f"--origin-to-force-quic-on={origin}",  # no TCP fallback: QUIC or nothing
                # The server listens on 127.0.0.1; localhost may resolve to ::1 first.
                "--host-resolver-rules=MAP localhost 127.0.0.1",
                f"--ignore-certificate-errors-spki-list={_spki_sha256(credentials.cert)}",
                f"--log-net-log={net_log}",
                "--dump-dom",
                f"https://{origin}/",
            ],
            capture_output=True,
            text=True,
            timeout=CHROMIUM_TIMEOUT_S,
            check=False,
        )
    # Chromium's stderr without its complaints about the D-Bus a container lacks.
    errors = [line for line in result.stderr.splitlines() if "dbus" not in line]
    assert 'data-ready="1"' in result.stdout, "\n".join(errors[-20:])
    # Read from the browser's own net-log: every file of the page over HTTP/3, status 200,
    # the manifest's byte count, and no QUIC connection error.
    problems = page_problems(read_net_log(net_log), load_manifest(site), origin)
    assert problems == [], "\n".join(problems)
