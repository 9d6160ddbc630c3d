"""The server's end of one subscription's WebSocket (RFC 6455 framing over an RFC 8441 stream),
sans-IO over wsproto's post-handshake `Connection`: bytes in, bytes to send out.

The publisher's messages and the server's close go out through `message` and `close`; the
client's bytes come in through `receive`, which answers a ping while the socket is open (after
its close frame the server may send nothing more, RFC 6455 5.5.1), answers the client's close,
drops the client's messages (it has nothing to say on this socket) and turns a frame that
breaks RFC 6455 into the close it calls for: 1002, or 1007 for text that is not UTF-8. No
bytes make `receive` raise; wsproto's parse errors arrive as events, not exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.frame_protocol import CloseReason


@dataclass(frozen=True)
class Received:
    """What one chunk of the client's bytes calls for."""

    data: bytes = b""  # to send back
    end_stream: bool = False  # ... and end the stream: nothing more is read or sent
    refused: CloseConnection | None = None  # the client broke RFC 6455: its code and reason


class ServerWebSocket:
    def __init__(self) -> None:
        self._ws = Connection(ConnectionType.SERVER)

    @property
    def open(self) -> bool:
        """Neither side has sent its close."""
        return self._ws.state is ConnectionState.OPEN

    @property
    def closed(self) -> bool:
        """Both closes are through: the handshake is done."""
        return self._ws.state is ConnectionState.CLOSED

    def message(self, body: bytes, text: bool) -> bytes:
        """One message (UTF-8 text, or binary); call while `open`."""
        return self._ws.send(TextMessage(body.decode()) if text else BytesMessage(body))

    def close(self, code: int = CloseReason.NORMAL_CLOSURE) -> bytes:
        """The server's close frame; call while `open`. The client's close comes to `receive`."""
        return self._ws.send(CloseConnection(code))

    def receive(self, data: bytes) -> Received:
        if self.closed:
            return Received()  # past the handshake: nothing the client sends means anything
        self._ws.receive_data(data)
        reply = bytearray()
        for event in self._ws.events():
            if isinstance(event, Ping) and self.open:
                reply += self._ws.send(event.response())
            elif isinstance(event, CloseConnection):
                return self._closing(event, bytes(reply))
        return Received(bytes(reply))

    def _closing(self, event: CloseConnection, reply: bytes) -> Received:
        """wsproto ends its parse at a close frame, and at a frame it refuses; either way it
        reads nothing more, so neither does this."""
        state = self._ws.state
        if state is ConnectionState.REMOTE_CLOSING:  # the client's close, answered
            return Received(reply + self._ws.send(event.response()), end_stream=True)
        if state is ConnectionState.CLOSED:  # the client's answer to the server's close
            return Received(reply)
        if state is ConnectionState.OPEN:  # a frame wsproto refused: fail the socket (7.1.7)
            close = self._ws.send(CloseConnection(event.code, event.reason))
            return Received(reply + close, end_stream=True, refused=event)
        # Refused after the server's own close: that close is out, the client's never will be.
        return Received(reply, end_stream=True, refused=event)
