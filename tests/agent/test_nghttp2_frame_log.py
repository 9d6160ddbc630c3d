"""`nghttp -v`'s frame log read as our HTTP/2 frame events (agent.engines.nghttp2.frame_log), on
canned output of nghttp 1.52 fetching the default site's page from nghttpd (page.verbose)."""

from __future__ import annotations

import collections
from pathlib import Path

from agent.engines.nghttp2.frame_log import frame_events
from agent.h2.trace import RECEIVED, SENT

OUTPUT = Path(__file__).parent / "nghttp2_output"


def test_every_logged_frame_is_an_event_in_order() -> None:
    text = (OUTPUT / "page.verbose").read_text()
    events = frame_events(text)
    assert len(events) == text.count(" frame <length=")
    kinds = collections.Counter((event.direction, event.frame_type) for event in events)
    # The page and its 7 subresources: a HEADERS each way per resource, nghttp's GOAWAY.
    assert kinds[(SENT, 0x1)] == kinds[(RECEIVED, 0x1)] == 8
    assert kinds[(SENT, 0x7)] == 1
    times = [event.time_ns for event in events]
    assert times == sorted(times)


def test_a_frame_lines_fields_and_what_is_not_a_frame() -> None:
    text = (
        "[  0.000] Connected\n"
        "[  1.234] recv DATA frame <length=16384, flags=0x01, stream_id=13>\n"
        "          ; END_STREAM\n"
        "[  1.235] recv (stream_id=13) :status: 200\n"
        "[  2.000] send EXTENSION frame <length=1, flags=0x00, stream_id=0>\n"
    )
    (event,) = frame_events(text)
    assert (event.time_ns, event.direction, event.frame_type) == (1_234_000_000, RECEIVED, 0)
    assert (event.flags, event.stream_id, event.length_bytes) == (1, 13, 16384)
