"""Server-sent events (the WHATWG HTML "text/event-stream" format), pure: the event framing the
server writes and the incremental parser the client reads with.

The parser follows the standard's algorithm: lines end in CR LF, LF or CR (a CR that ends one
chunk may pair with an LF that starts the next); `field: value` with one optional space after
the colon; `data` lines are joined with LF; a blank line dispatches the event unless its data is
empty; comments (a leading colon) and unknown fields are ignored; a BOM at the very start is
dropped. It holds at most `max_event_bytes` of one event: a peer that never ends an event gets
an SseError, not the client's memory. Scanning resumes where it stopped, so an item of tens of
MB that arrives in 16 KiB DATA frames costs linear time.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.workloads.stream.errors import StreamPeerError

CONTENT_TYPE = b"text/event-stream"
_BOM = b"\xef\xbb\xbf"


class SseError(StreamPeerError):
    """The event stream broke the format or a bound."""


@dataclass(frozen=True)
class Event:
    data: str
    event: str = "message"
    id: str | None = None


def encode_event(
    data: str, event: str | None = None, event_id: str | None = None, retry_ms: int | None = None
) -> bytes:
    """One event; multi-line data becomes one `data:` line per line. `retry_ms` sets the
    reconnection time of the EventSource that reads it."""
    lines = [] if retry_ms is None else [f"retry: {int(retry_ms)}"]
    if event_id is not None:
        lines.append(f"id: {_one_line(event_id, 'id')}")
    if event is not None:
        lines.append(f"event: {_one_line(event, 'event')}")
    lines.extend(
        f"data: {line}" for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    )
    return ("\n".join(lines) + "\n\n").encode()


def _one_line(value: str, field: str) -> str:
    if "\n" in value or "\r" in value or (field == "id" and "\0" in value):
        raise ValueError(f"an SSE {field} must be one line: {value!r}")
    return value


class SseParser:
    def __init__(self, max_event_bytes: int) -> None:
        self.max_event_bytes = max_event_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of _buffer already searched for a line end
        self._started = False  # the BOM check is done
        self._after_cr = False  # the last line ended in CR: a leading LF belongs to it
        self._data: list[str] = []
        self._data_bytes = 0
        self._event = ""
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        buffer = self._buffer
        buffer += chunk
        if not self._started:
            if len(buffer) < len(_BOM) and _BOM.startswith(bytes(buffer)):
                return []
            self._started = True
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
        events: list[Event] = []
        start = 0
        if self._after_cr and buffer:
            start = 1 if buffer[0] == 0x0A else 0
            self._after_cr = False
        position = max(start, self._scanned)
        while True:
            cr = buffer.find(b"\r", position)
            lf = buffer.find(b"\n", position)
            if cr < 0 and lf < 0:
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            line = bytes(buffer[start:end])
            if end == cr:
                if end + 1 < len(buffer):
                    position = end + 2 if buffer[end + 1] == 0x0A else end + 1
                else:
                    position = end + 1
                    self._after_cr = True
            else:
                position = end + 1
            start = position
            event = self._line(line)
            if event is not None:
                events.append(event)
        del buffer[:start]
        self._scanned = len(buffer)
        if self._data_bytes + len(buffer) > self.max_event_bytes:
            raise SseError(
                f"an SSE event longer than {self.max_event_bytes} bytes (the bound for this "
                "stream's items)"
            )
        return events

    def _line(self, raw: bytes) -> Event | None:
        if not raw:
            return self._dispatch()
        try:
            line = raw.decode()
        except UnicodeDecodeError:
            raise SseError("an SSE line that is not UTF-8") from None
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_bytes += len(raw) + 1
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        return None

    def _dispatch(self) -> Event | None:
        data, event = self._data, self._event
        self._data, self._data_bytes, self._event = [], 0, ""
        if not data:
            return None
        return Event("\n".join(data), event or "message", self._last_id)
