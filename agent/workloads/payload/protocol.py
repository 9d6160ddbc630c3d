"""What the payload client and server say to each other beyond HTTP/2: the path, and the header
fields carrying the digest (and, for a SOAP encoding, SOAPAction) one way and the server's
decode figures back. Pure.

The server's decode CPU and parse RSS travel in the response's headers, per message: the
client's record has them beside its own per-message figures without joining two logs, a message
and its figures cannot be paired wrongly, and the server's trial ledger stays as it is. The
cost is a few header bytes, counted in HEADERS like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.errors import PeerProtocolError
from agent.workloads.payload.codecs.envelope import OPERATION_NS

Header = tuple[bytes, bytes]

PATH = "/payload"
DIGEST_HEADER = b"h2iot-payload-sha256"  # request: sha256 of the dataset's packed form
DECODE_CPU_HEADER = b"h2iot-payload-decode-cpu-ns"
RSS_PEAK_HEADER = b"h2iot-payload-rss-peak-bytes"
RSS_ADDED_HEADER = b"h2iot-payload-rss-added-bytes"
REFUSALS_HEADER = b"h2iot-payload-refusals"  # bodies refused since the server started
# SOAP 1.1 section 6.1.1: an HTTP client must send SOAPAction, a quoted URI naming the intent;
# ours names the envelope's one operation, p:send. "" says the Request-URI names it.
SOAP_ACTION_HEADER = b"soapaction"
SOAP_ACTION = f'"{OPERATION_NS}#send"'.encode()
_SOAP_ACTIONS_TAKEN = (SOAP_ACTION, b'""')
_SOAP_ACTIONS_SHOWN = f'{SOAP_ACTION.decode()} or ""'
# int64's: a longer figure is none of ours (and int() refuses thousands of digits).
_MAX_DIGITS = 19


def soap_action_refusal(value: bytes | None) -> str:
    """Why a SOAP request's SOAPAction field is refused; "" when it is taken."""
    if value is None:
        return f"a SOAP 1.1 request must carry SOAPAction (section 6.1.1): {_SOAP_ACTIONS_SHOWN}"
    if value in _SOAP_ACTIONS_TAKEN:
        return ""
    shown = value[:100].decode("latin-1")
    return f"SOAPAction {shown!r} names no operation here: {_SOAP_ACTIONS_SHOWN}"


@dataclass(frozen=True)
class DecodeFigures:
    """The server's measurement of one message's decode."""

    cpu_ns: int
    rss_peak_bytes: int  # VmHWM after the decode, the mark reset just before it
    rss_added_bytes: int  # that peak less VmRSS before the decode

    def headers(self) -> tuple[Header, ...]:
        return (
            (DECODE_CPU_HEADER, b"%d" % self.cpu_ns),
            (RSS_PEAK_HEADER, b"%d" % self.rss_peak_bytes),
            (RSS_ADDED_HEADER, b"%d" % self.rss_added_bytes),
        )

    @classmethod
    def from_headers(cls, headers: Mapping[bytes, bytes]) -> DecodeFigures:
        def number(name: bytes) -> int:
            value = headers.get(name)
            if value is None or not value.isdigit() or len(value) > _MAX_DIGITS:
                raise PeerProtocolError(f"payload server: header {name.decode()} is {value!r}")
            return int(value)

        return cls(number(DECODE_CPU_HEADER), number(RSS_PEAK_HEADER), number(RSS_ADDED_HEADER))
