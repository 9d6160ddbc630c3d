"""A client's QUIC v1 Initial packets made by hand (RFC 9000 section 17.2.2, RFC 9001 section 5),
so a test can send a first flight in a shape no library client produces (CRYPTO frames out of
order and an empty Source Connection ID beside an 8-byte Destination one, as Chromium sends
them), and read Initial packets back."""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agent.h3.empty_cid import initial_keys

VERSION_1 = 1
_PN_LENGTH = 2
_TAG = 16


def varint(value: int) -> bytes:
    for prefix, size in ((0, 1), (0x40, 2), (0x80, 4), (0xC0, 8)):
        if value < 1 << (8 * size - 2):
            return (value | prefix << (8 * size - 8)).to_bytes(size, "big")
    raise ValueError(value)


def pull_varint(data: bytes, offset: int) -> tuple[int, int]:
    size = 1 << (data[offset] >> 6)
    return int.from_bytes(data[offset : offset + size], "big") & ((1 << (8 * size - 2)) - 1), (
        offset + size
    )


def crypto_frame(offset: int, data: bytes) -> bytes:
    return b"\x06" + varint(offset) + varint(len(data)) + data


def _mask(hp: bytes, sample: bytes) -> bytes:
    encryptor = Cipher(algorithms.AES(hp), modes.ECB()).encryptor()
    return encryptor.update(sample) + encryptor.finalize()


def client_initial(
    destination_cid: bytes, source_cid: bytes, packet_number: int, frames: bytes, size: int = 1200
) -> bytes:
    """One client Initial datagram carrying `frames`, padded (PADDING frames) to `size`."""
    key, iv, hp = initial_keys(destination_cid, VERSION_1, from_client=True)
    head = (
        bytes([0xC0 | (_PN_LENGTH - 1)])
        + VERSION_1.to_bytes(4, "big")
        + bytes([len(destination_cid)])
        + destination_cid
        + bytes([len(source_cid)])
        + source_cid
        + b"\x00"  # no token
    )
    padding = size - (len(head) + 2 + _PN_LENGTH + len(frames) + _TAG)
    payload = frames + b"\x00" * max(padding, 0)
    header = (
        head
        + (0x4000 | (_PN_LENGTH + len(payload) + _TAG)).to_bytes(2, "big")
        + packet_number.to_bytes(_PN_LENGTH, "big")
    )
    nonce = (int.from_bytes(iv, "big") ^ packet_number).to_bytes(12, "big")
    sealed = AESGCM(key).encrypt(nonce, payload, header)
    mask = _mask(hp, sealed[4 - _PN_LENGTH : 4 - _PN_LENGTH + 16])
    protected = bytearray(header)
    protected[0] ^= mask[0] & 0x0F
    for i in range(_PN_LENGTH):
        protected[len(header) - _PN_LENGTH + i] ^= mask[1 + i]
    return bytes(protected) + sealed


@dataclass(frozen=True)
class LongPacket:
    packet_type: int  # 0 Initial, 1 0-RTT, 2 Handshake, 3 Retry
    destination_cid: bytes
    source_cid: bytes
    payload: bytes | None  # an Initial's frames, decrypted; None for the other types


def long_packets(
    datagram: bytes, client_destination_cid: bytes, *, from_client: bool
) -> list[LongPacket]:
    """The long-header packets of a datagram one side sent, its Initials decrypted with the
    keys of the client's first Destination Connection ID; stops at a short header."""
    key, iv, hp = initial_keys(client_destination_cid, VERSION_1, from_client=from_client)
    packets = []
    start = 0
    while start < len(datagram) and datagram[start] & 0x80:
        first = datagram[start]
        at = start + 5
        destination_cid = datagram[at + 1 : at + 1 + datagram[at]]
        at += 1 + datagram[at]
        source_cid = datagram[at + 1 : at + 1 + datagram[at]]
        at += 1 + datagram[at]
        packet_type = (first >> 4) & 3
        if packet_type == 0:
            token_length, at = pull_varint(datagram, at)
            at += token_length
        length, at = pull_varint(datagram, at)
        end = at + length
        payload = None
        if packet_type == 0:
            mask = _mask(hp, datagram[at + 4 : at + 20])
            unmasked = first ^ (mask[0] & 0x0F)
            pn_length = (unmasked & 3) + 1
            pn = bytes(datagram[at + i] ^ mask[1 + i] for i in range(pn_length))
            header = bytes([unmasked]) + datagram[start + 1 : at] + pn
            nonce = (int.from_bytes(iv, "big") ^ int.from_bytes(pn, "big")).to_bytes(12, "big")
            payload = AESGCM(key).decrypt(nonce, datagram[at + pn_length : end], header)
        packets.append(LongPacket(packet_type, destination_cid, source_cid, payload))
        start = end
    return packets


def crypto_and_close(payload: bytes) -> tuple[list[tuple[int, bytes]], bytes | None]:
    """An Initial's CRYPTO frames [(offset, data)] and its CONNECTION_CLOSE's reason, if any
    (PADDING, PING and ACK frames skipped: all an Initial may hold besides)."""
    crypto: list[tuple[int, bytes]] = []
    at = 0
    while at < len(payload):
        frame_type, at = pull_varint(payload, at)
        if frame_type in (0x00, 0x01):
            continue
        if frame_type in (0x02, 0x03):
            for _ in range(2):
                _, at = pull_varint(payload, at)
            ranges, at = pull_varint(payload, at)
            for _ in range(1 + 2 * ranges + (3 if frame_type == 0x03 else 0)):
                _, at = pull_varint(payload, at)
        elif frame_type == 0x06:
            offset, at = pull_varint(payload, at)
            length, at = pull_varint(payload, at)
            crypto.append((offset, payload[at : at + length]))
            at += length
        elif frame_type == 0x1C:
            for _ in range(2):
                _, at = pull_varint(payload, at)
            length, at = pull_varint(payload, at)
            return crypto, payload[at : at + length]
        else:
            raise AssertionError(f"unexpected frame type {frame_type:#x} in an Initial")
    return crypto, None
