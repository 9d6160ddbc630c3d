"""`nghttp -v`'s frame log as the frame events of our own HTTP/2 trace (agent.h2.trace), so an
nghttp trial's trace reads as our client's: pure, from the tool's output text.

nghttp prints each frame it sends or receives as `[  S.mmm] send|recv NAME frame <length=N,
flags=0xFF, stream_id=N>`, S.mmm the seconds since its start to the millisecond (so several
frames share a time), the frame's details indented on the lines after. Lines of another form
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
