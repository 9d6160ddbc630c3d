"""What one gtlsclient run (ngtcp2 0.12, without `-q`) says about its connection, pure: whether
the handshake resumed a session, whether it sent 0-RTT early data and the server refused it,
when the handshake completed, and the UDP payload bytes it sent and received.

- Resumed: the server's ServerHello (the first `Ordered CRYPTO data in Initial crypto level`
  hex dump) carries the pre_shared_key extension (41, RFC 8446 4.2.11): the server took the
  ticket. gtlsclient prints no word of it.
- Early data sent: a `pkt tx ... type=0RTT` line; refused: `Early data was rejected by server`.
- Handshake done: the ngtcp2 log's timestamp (`I<ms since the connection's start>`) last
  printed before `QUIC handshake has completed`; ms steps.
- Request and response: the ngtcp2 log's timestamp of the first STREAM frame sent on the
  request's stream (`http: stream 0xN submit request headers`: in 0-RTT or after the
  handshake), and of the frame received on it with fin=1 (the response's last byte); ms steps.
- Status: the first response's `[:status: N]` line.
- Bytes: the sum of its `Sent packet: ... N bytes` and `Received packet: ... N bytes` lines
  (UDP payloads, the QUIC datagrams whole).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CRYPTO_INITIAL = "Ordered CRYPTO data in Initial crypto level"
_HANDSHAKE_DONE = "QUIC handshake has completed"
_EARLY_REJECTED = "Early data was rejected by server"
_HEX_ROW = re.compile(r"^[0-9a-f]{8}  ((?:[0-9a-f]{2} {1,2})+)")
_LOG_MS = re.compile(r"^I(\d{8}) ")
_STATUS = re.compile(r"^http: stream 0x[0-9a-f]+ \[:status: (\d{3})\]$")
_PACKET = re.compile(r"^(Sent|Received) packet: .* (\d+) bytes$")
_SUBMITTED = re.compile(r"^http: stream (0x[0-9a-f]+) submit request headers$")
_STREAM_FRAME = re.compile(
    r" frm (tx|rx) \d+ \S+ STREAM\(0x[0-9a-f]+\) id=(0x[0-9a-f]+) fin=([01]) "
)
_SERVER_HELLO = 2
_PRE_SHARED_KEY = 41
# ServerHello body: legacy_version (2), random (32), then legacy_session_id_echo.
_SESSION_ID_AT = 4 + 2 + 32


@dataclass(frozen=True)
class GtlsConnection:
    resumed: bool
    early_data_sent: bool
    early_data_rejected: bool
    handshake_done_ms: int | None  # None where the handshake never completed
    request_sent_ms: int | None  # None where no request left
    response_done_ms: int | None  # None where the response never ended
    status: int | None  # the first response's :status; None where none came
    bytes_sent: int
    bytes_received: int

    @property
    def response_s(self) -> float | None:
        """From the request's first frame sent to its response's last byte; None where either
        is missing."""
        if self.request_sent_ms is None or self.response_done_ms is None:
            return None
        return (self.response_done_ms - self.request_sent_ms) / 1e3


def _hex_block(lines: list[str], start: int) -> bytes:
    data = bytearray()
    for line in lines[start:]:
        row = _HEX_ROW.match(line)
        if row is None:
            break
        data += bytes.fromhex(row.group(1).replace(" ", ""))
    return bytes(data)


def _server_hello_psk(message: bytes) -> bool:
    """Whether the TLS handshake message `message` is a ServerHello selecting a PSK; False for
    anything cut short or malformed."""
    if len(message) <= _SESSION_ID_AT or message[0] != _SERVER_HELLO:
        return False
    at = _SESSION_ID_AT + 1 + message[_SESSION_ID_AT] + 2 + 1  # cipher suite, compression
    if at + 2 > len(message):
        return False
    end = min(len(message), at + 2 + int.from_bytes(message[at : at + 2], "big"))
    at += 2
    while at + 4 <= end:
        kind = int.from_bytes(message[at : at + 2], "big")
        if kind == _PRE_SHARED_KEY:
            return True
        at += 4 + int.from_bytes(message[at + 2 : at + 4], "big")
    return False


def _stream_times(lines: list[str]) -> tuple[int | None, int | None]:
    """(request sent ms, response done ms) on the first submitted request's stream."""
    stream = next((m.group(1) for m in map(_SUBMITTED.match, lines) if m is not None), None)
    sent = done = None
    for line in lines:
        stamp, frame = _LOG_MS.match(line), _STREAM_FRAME.search(line)
        if stamp is None or frame is None or frame.group(2) != stream:
            continue
        if frame.group(1) == "tx" and sent is None:
            sent = int(stamp.group(1))
        elif frame.group(1) == "rx" and frame.group(3) == "1" and done is None:
            done = int(stamp.group(1))
    return sent, done


def parse_gtls_log(text: str) -> GtlsConnection:
    """The connection as gtlsclient's log (stdout and stderr together) tells it."""
    lines = text.splitlines()
    request_sent_ms, response_done_ms = _stream_times(lines)
    resumed = False
    seen_hello = False
    last_ms: int | None = None
    done_ms: int | None = None
    sent = received = 0
    status: int | None = None
    for number, line in enumerate(lines):
        stamp = _LOG_MS.match(line)
        if stamp is not None:
            last_ms = int(stamp.group(1))
            continue
        answered = _STATUS.match(line)
        if answered is not None and status is None:
            status = int(answered.group(1))
        packet = _PACKET.match(line)
        if packet is not None:
            if packet.group(1) == "Sent":
                sent += int(packet.group(2))
            else:
                received += int(packet.group(2))
        elif line == _CRYPTO_INITIAL and not seen_hello:
            seen_hello = True
            resumed = _server_hello_psk(_hex_block(lines, number + 1))
        elif line == _HANDSHAKE_DONE and done_ms is None:
            done_ms = 0 if last_ms is None else last_ms
    return GtlsConnection(
        resumed=resumed,
        early_data_sent=any(" pkt tx " in line and "type=0RTT" in line for line in lines),
        early_data_rejected=_EARLY_REJECTED in text,
        handshake_done_ms=done_ms,
        request_sent_ms=request_sent_ms,
        response_done_ms=response_done_ms,
        status=status,
        bytes_sent=sent,
        bytes_received=received,
    )
