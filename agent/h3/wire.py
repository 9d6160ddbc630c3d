"""HTTP/3 request streams under the names h2's H2Connection gives HTTP/2's
(agent.server.streamed.StreamWire, agent.exchange_queues.FrameSender), so that exchanges whose
bodies go piece by piece run over either protocol with the same code.

Two things differ from HTTP/2, both QUIC's:
- Credit is the stack's own. qh3 keeps a fixed sliding window that opens as bytes reach the
  application, so giving credit back for bytes a handler took is nothing to do here, and a peer
  may send more of a body we refuse until told to stop: STOP_SENDING, at once (RFC 9114 4.1).
- What a stream "may send now" is room in qh3's send buffer, not the peer's window (qh3 paces
  what it holds by the peer's credit itself): at most `STREAM_BUFFER_BYTES` is handed to qh3
  ahead of what its packets carried, so a peer that stops reading holds that much of each of
  its streams in this process, not whole bodies.

Error codes come in as HTTP/2's and leave as HTTP/3's (RFC 9114 appendix A.4).
"""

from __future__ import annotations

import contextlib
from typing import Any

from h2.errors import ErrorCodes
from qh3.h3.connection import ErrorCode, H3Connection
from qh3.quic.connection import QuicConnectionError
from qh3.quic.packet import QuicErrorCode

from agent.errors import ProtocolCode

# What qh3 may hold unsent of one stream before it is handed more (qh3 copies what it is handed).
STREAM_BUFFER_BYTES = 256 * 1024

H3_CODES: dict[int, ErrorCode] = {
    ErrorCodes.NO_ERROR: ErrorCode.H3_NO_ERROR,
    ErrorCodes.PROTOCOL_ERROR: ErrorCode.H3_GENERAL_PROTOCOL_ERROR,
    ErrorCodes.INTERNAL_ERROR: ErrorCode.H3_INTERNAL_ERROR,
    ErrorCodes.REFUSED_STREAM: ErrorCode.H3_REQUEST_REJECTED,
    ErrorCodes.CANCEL: ErrorCode.H3_REQUEST_CANCELLED,
    ErrorCodes.CONNECT_ERROR: ErrorCode.H3_CONNECT_ERROR,
    ErrorCodes.ENHANCE_YOUR_CALM: ErrorCode.H3_EXCESSIVE_LOAD,
}


def h3_error_code(h2_code: int) -> int:
    """HTTP/2's error code as HTTP/3's; one with no counterpart is a general protocol error."""
    return H3_CODES.get(h2_code, ErrorCode.H3_GENERAL_PROTOCOL_ERROR)


def h3_code(value: int) -> ProtocolCode:
    """An HTTP/3 error code (a stream's reset, an application's CONNECTION_CLOSE)."""
    return ProtocolCode.among("HTTP/3", value, ErrorCode)


def h3_error_name(code: int) -> str:
    """An HTTP/3 error code as messages name it (H3_REQUEST_CANCELLED), or its number."""
    return h3_code(code).name or f"error code 0x{code:x}"


def close_code(value: int, frame_type: int | None) -> ProtocolCode:
    """The code of a QUIC connection's close as qh3's ConnectionTerminated gives it: QUIC's own
    (a transport close names the frame at fault, if only as 0) or HTTP/3's (an application
    close names none). qh3's own ends (idle timeout, a local close) say 0 with no frame: QUIC's
    NO_ERROR, which HTTP/3 never sends (its NO_ERROR is 0x100)."""
    if frame_type is None and value:
        return h3_code(value)
    return ProtocolCode.among("QUIC", value, QuicErrorCode)


class H3Wire:
    """One connection's request streams: HTTP/3 frames through qh3's H3 layer, resets through
    its QUIC connection (`quic`: qh3's QuicConnection, its core tapped or not)."""

    def __init__(
        self, h3: H3Connection, quic: Any, buffer_bytes: int = STREAM_BUFFER_BYTES
    ) -> None:
        self._h3 = h3
        self._quic = quic
        self._buffer_bytes = buffer_bytes

    def local_flow_control_window(self, stream_id: int, /) -> int:
        held: int = self._quic.get_send_buffer_size(stream_id)
        return max(0, self._buffer_bytes - held)

    def send_data(
        self, stream_id: int, data: bytes | memoryview, /, end_stream: bool = False
    ) -> None:
        self._h3.send_data(stream_id, data, end_stream)

    def end_stream(self, stream_id: int, /) -> None:
        self._h3.send_data(stream_id, b"", True)

    def send_headers(
        self, stream_id: int, headers: list[tuple[bytes, bytes]], /, end_stream: bool = False
    ) -> None:
        self._h3.send_headers(stream_id, headers, end_stream=end_stream)

    def reset_stream(self, stream_id: int, error_code: int = 0, /) -> None:
        """NO_ERROR: stop the peer's sending only (our response is complete, or on its way);
        any other code: both directions. A side already finished is left as it is."""
        code = h3_error_code(error_code)
        # qh3 refuses a reset of a side that is over (both ends' FINs through, a reset crossed).
        with contextlib.suppress(QuicConnectionError):
            if error_code != ErrorCodes.NO_ERROR:
                self._quic.reset_stream(stream_id, code)
        with contextlib.suppress(QuicConnectionError):
            self._quic.stop_stream(stream_id, code)

    def acknowledge_received_data(self, acknowledged_size: int, stream_id: int, /) -> None:
        """qh3 gave the credit when it delivered the bytes."""

    def increment_flow_control_window(self, increment: int, /) -> None:
        """qh3 gave the credit when it delivered the bytes."""

    def remote_flow_control_window(self, stream_id: int, /) -> int:
        """Unknown to us (qh3 grants it): a refused body is stopped at once."""
        return 0
