"""`nghttp -v`'s and `nghttpd -v`'s frame logs as the frame events of our own HTTP/2 trace
(agent.h2.trace), so an nghttp2 engine trial's trace reads as our agent's: pure, from the
tools' output text.

nghttp prints each frame it sends or receives as `[  S.mmm] send|recv NAME frame <length=N,
flags=0xFF, stream_id=N>`, S.mmm the seconds since its start to the millisecond (so several
frames share a time), the frame's details indented on the lines after. nghttpd prints the same
with its connection's `[id=N] ` before (S.mmm since the server's start). Lines of another form
(header fields, `Connected`, the -s table) are not frames and are passed over.
"""

from __future__ import annotations

import re

from agent.h2.frames import FRAME_TYPE_NAMES
from agent.h2.trace import RECEIVED, SENT, FrameEvent

_FRAME = re.compile(
    r"\[\s*(?P<s>\d+)\.(?P<ms>\d{3})\] (?P<dir>send|recv) (?P<name>[A-Z_]+) frame "
    r"<length=(?P<length>\d+), flags=0x(?P<flags>[0-9a-f]{2}), stream_id=(?P<stream_id>\d+)>"
)
_TYPES = {name: frame_type for frame_type, name in FRAME_TYPE_NAMES.items()}
_DIRECTIONS = {"send": SENT, "recv": RECEIVED}


def frame_events(text: str) -> list[FrameEvent]:
    """Each frame nghttp -v logged, in its order, `time_ns` since the tool's start. A frame
    type it names that HTTP/2 does not define is left out (nghttp prints those by number)."""
    events = []
    for match in _FRAME.finditer(text):
        frame_type = _TYPES.get(match["name"])
        if frame_type is None:
            continue
        events.append(
            FrameEvent(
                time_ns=(int(match["s"]) * 1000 + int(match["ms"])) * 1_000_000,
                direction=_DIRECTIONS[match["dir"]],
                frame_type=frame_type,
                flags=int(match["flags"], 16),
                stream_id=int(match["stream_id"]),
                length_bytes=int(match["length"]),
            )
        )
    return events


_CONNECTION = re.compile(r"\[id=(?P<id>\d+)\] ")
_CLOSED = "closed"


class ServerFrameLog:
    """`nghttpd -v`'s output, line by line, cut per trial by connection: nghttpd serves many
    trials in one process and prefixes each line of a connection with `[id=N]`, so a trial's
    frames are those of the connections that began while it was open (the client opens its
    own). A connection is over at its `[id=N] [  S.mmm] closed` line. Sans-IO: the caller
    feeds lines, opens and closes trials, and waits for `settled` as it likes."""

    def __init__(self) -> None:
        self._open = False
        self._seen: set[str] = set()  # every connection id so far
        self._mine: set[str] = set()  # the open trial's connections
        self._live: set[str] = set()  # of those, the ones not closed yet
        self._lines: list[str] = []

    def feed(self, line: str) -> bool:
        """One line of nghttpd's output (without its newline); whether it belongs to a
        connection (else another kind of line: `listen`, an error, which the caller shows)."""
        match = _CONNECTION.match(line)
        if match is None:
            # The indented details under a frame belong to it; the frame line says enough.
            return line.startswith(" ")
        connection = match["id"]
        if connection not in self._seen:
            self._seen.add(connection)
            if self._open:
                self._mine.add(connection)
                self._live.add(connection)
        if connection in self._mine:
            self._lines.append(line)
            if line.endswith(f"] {_CLOSED}"):
                self._live.discard(connection)
        return True

    def begin(self) -> None:
        """A trial opens: connections that begin from now are its."""
        self._open = True
        self._mine.clear()
        self._live.clear()
        self._lines.clear()

    def end(self) -> None:
        """The trial's client is done: no new connection is its; its own may still close."""
        self._open = False

    @property
    def settled(self) -> bool:
        """Every connection of the trial has closed (none began: nothing to wait for)."""
        return not self._live

    def take(self) -> list[FrameEvent]:
        """The trial's frames so far; the log forgets them and the trial's connections."""
        events = frame_events("\n".join(self._lines))
        self._lines.clear()
        self._mine.clear()
        self._live.clear()
        return events
