"""A qh3 server connection that answers a client whose connection ID is zero-length.

RFC 9000 section 7.2: a server sets the Destination Connection ID of what it sends from the
Source Connection ID of the client's first packet, and section 5.1 lets that ID be empty.
Chromium's QUIC client uses an empty one (and an 8-byte Destination Connection ID); qh3's
server, 2.1.0, fails such a client twice over:

- its Python layer learns the client's ID only when it is non-empty
  (`QuicConnection._learn_remote_source_cid`, `if header[4]:` in qh3/quic/connection.py), so
  the TLS bridge keeps None where the client's `initial_source_connection_id` transport
  parameter says b"", and the ClientHello is refused with TRANSPORT_PARAMETER_ERROR
  ("initial_source_connection_id does not match") in place of a ServerHello;
- its native core, made with the client's Destination Connection ID as the peer's, keeps that
  ID when the client's turns out empty, so everything it sends (that CONNECTION_CLOSE
  included) is addressed to a connection ID the client never had, and Chromium drops it
  unread. The client retransmits its Initial until its 4 s handshake idle timeout:
  "No recent network activity", net::ERR_QUIC_PROTOCOL_ERROR.

Clients that choose a non-empty ID (qh3's, aioquic's, ngtcp2's, curl's) never meet either.
Found and checked on 2026-12-06 (docs/qh3-chromium.md has the reproduction).

The fix, for the server side of an Initial whose Source Connection ID is empty: the core is
made with that empty ID as the peer's, so it addresses the client correctly, and is given the
Initial keys, which qh3's core would derive from the ID it was given, derived here from the
client's Destination Connection ID (RFC 9001 section 5.2; RFC 9369 for QUIC v2). The core
accepts only packets addressed to its own ID or to the one it was made with, and the client
keeps sending to its original Destination Connection ID until it hears from the server: so
the server takes that ID as its own (`host_cid`). RFC 9000 lets a server choose any ID; this
one links the client's first packets to the server's, which a client without a connection ID
gives away anyway (its packets are told apart by address alone). It needs the ID to be as
long as the server's connection IDs (qh3 parses short headers at that length): Chromium's
8 bytes are qh3's default; a longer one is left to qh3 as before.

Only for the qh3 versions known to have the defect (`AFFECTED_QH3`): the override reads and
replaces qh3's private methods of exactly that version.
"""

from __future__ import annotations

import qh3
from qh3._hazmat import pull_quic_header
from qh3.quic.connection import NetworkAddress, QuicConnection
from qh3.quic.crypto import derive_key_iv_hp
from qh3.quic.packet import QuicPacketType, QuicProtocolVersion
from qh3.quic.tls_bridge import QuicTlsBridge
from qh3.tls import CipherSuite, cipher_suite_hash, hkdf_expand_label, hkdf_extract

AFFECTED_QH3 = frozenset({"2.1.0"})

# RFC 9001 section 5.2 (v1) and RFC 9369 section 3.3.1 (v2): the salts Initial secrets are
# extracted with. Initial packets always use AES-128-GCM with SHA-256.
INITIAL_SALTS: dict[int, bytes] = {
    QuicProtocolVersion.VERSION_1: bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a"),
    QuicProtocolVersion.VERSION_2: bytes.fromhex("0dede3def700a6db819381be6e269dcbf9bd2ed9"),
}
_INITIAL_SUITE = CipherSuite.AES_128_GCM_SHA256
# qh3's names for that suite's AEAD and header protection (qh3.quic.crypto.CIPHER_SUITES)
_INITIAL_ALGORITHMS = ("aes-128-gcm", "aes-128-ecb")
_MIN_INITIAL_DATAGRAM = 1200  # RFC 9000 section 14.1; qh3 ignores a shorter first datagram


def initial_keys(
    destination_cid: bytes, version: int, *, from_client: bool
) -> tuple[bytes, bytes, bytes]:
    """The packet key, IV and header-protection key of the Initial packets one side sends,
    from the Destination Connection ID of the client's first Initial. Pure."""
    algorithm = cipher_suite_hash(_INITIAL_SUITE)
    initial_secret = hkdf_extract(algorithm, INITIAL_SALTS[version], destination_cid)
    label = b"client in" if from_client else b"server in"
    secret = hkdf_expand_label(algorithm, initial_secret, label, b"", 32)
    return derive_key_iv_hp(cipher_suite=_INITIAL_SUITE, secret=secret, version=version)


class EmptyPeerCidConnection(QuicConnection):
    """qh3's QuicConnection, which as a server also completes a handshake with a client whose
    Source Connection ID is empty (the module's docstring). Anything else passes unchanged.

    Class attributes stand in for instance defaults: agent.h3.stack.tap swaps an existing
    connection's class to a subclass of this one, so no __init__ of ours runs."""

    # The client's first Destination Connection ID and the version whose Initial keys the core
    # was given, while this connection answers an empty peer ID (None otherwise).
    _empty_peer_initial: tuple[bytes, int] | None = None
    fixes_empty_peer_cid = qh3.__version__ in AFFECTED_QH3

    def receive_datagram(self, data: bytes, addr: NetworkAddress, now: float) -> None:
        if self._core is None and not self._is_client and self.fixes_empty_peer_cid:
            self._detect_empty_peer_cid(data)
        super().receive_datagram(data, addr, now)

    def _detect_empty_peer_cid(self, data: bytes) -> None:
        """Before qh3 makes the core of a server connection: whether the datagram that will
        make it comes from a client with an empty ID. The same checks as qh3's, so that only
        the datagram qh3 makes the connection of can change it."""
        if len(data) < _MIN_INITIAL_DATAGRAM:
            return
        id_length = self._configuration.connection_id_length
        try:
            header = pull_quic_header(data, 0, id_length)
        except ValueError:
            return
        version, packet_type, destination_cid, source_cid = (
            header[0],
            header[1],
            header[3],
            header[4],
        )
        if (
            packet_type != int(QuicPacketType.INITIAL)
            or version not in self._configuration.supported_versions
            or version not in INITIAL_SALTS
            or source_cid
            or len(destination_cid) != id_length
        ):
            return
        # The server's own ID is the one the client already sends to (the docstring says why);
        # qh3's server routes it to this connection already (it registers the client's first
        # Destination Connection ID).
        self.host_cid = destination_cid
        self._empty_peer_initial = (destination_cid, version)

    def _create_core(self, remote_addr: NetworkAddress, initial_dcid: bytes, now: float) -> None:
        if self._empty_peer_initial is None:
            super()._create_core(remote_addr, initial_dcid, now)
            return
        super()._create_core(remote_addr, b"", now)
        self._install_initial_keys(self._empty_peer_initial[1])

    def _create_tls(self, remote_source_cid: bytes | None) -> QuicTlsBridge:
        if self._empty_peer_initial is not None:
            # What the client's initial_source_connection_id parameter must say.
            remote_source_cid = b""
        return super()._create_tls(remote_source_cid)

    def _set_version(self, version: int) -> None:
        """A compatible version negotiation (RFC 9368) moved the connection to `version`: its
        Initial keys change with it (the core would derive them from the empty ID)."""
        super()._set_version(version)
        if self._empty_peer_initial is not None and version in INITIAL_SALTS:
            self._install_initial_keys(version)

    def _install_initial_keys(self, version: int) -> None:
        assert self._core is not None and self._empty_peer_initial is not None
        destination_cid = self._empty_peer_initial[0]
        self._empty_peer_initial = (destination_cid, version)
        for direction, from_client in (("send", False), ("receive", True)):
            key, iv, hp = initial_keys(destination_cid, version, from_client=from_client)
            self._core.install_packet_key(
                direction, 0, _INITIAL_ALGORITHMS, key, iv, hp, 0, None, version
            )
