"""`nghttp -v`'s and `nghttpd -v`'s frame logs read as our HTTP/2 frame events
(agent.engines.nghttp2.frame_log), on canned output of nghttp 1.52 fetching the default site's page
from nghttpd (page.verbose) and of nghttpd 1.52 serving two fetches in turn."""

from __future__ import annotations

import collections
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agent.engines.nghttp2.frame_log import ServerFrameLog, frame_events
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


def _fed(log: ServerFrameLog, lines: list[str]) -> list[str]:
    """The lines the log did not take (what the server's relay shows)."""
    return [line for line in lines if not log.feed(line)]


def test_nghttpd_s_log_is_cut_by_connection() -> None:
    """nghttpd 1.52 -v serving two fetches in turn (a 40 kB file, then index.html): a trial
    opened before the second connection gets its frames alone, once it has closed."""
    lines = (OUTPUT / "nghttpd_two_connections.verbose").read_text().splitlines()
    second = next(i for i, line in enumerate(lines) if line.startswith("[id=2]"))
    log = ServerFrameLog()
    shown = _fed(log, lines[:second])
    log.begin()
    shown += _fed(log, lines[second:-1])
    log.end()
    assert not log.settled  # its `closed` line is still to come
    shown += _fed(log, lines[-1:])
    assert log.settled
    assert shown == ["IPv4: listen 0.0.0.0:18082", "IPv6: listen :::18082"]
    events = log.take()
    assert len(events) == sum(
        " frame <length=" in line for line in lines[second:] if line.startswith("[id=2]")
    )
    kinds = collections.Counter((event.direction, event.frame_type) for event in events)
    assert kinds[(RECEIVED, 0x1)] == kinds[(SENT, 0x1)] == 1  # one GET, one response
    assert kinds[(RECEIVED, 0x7)] == 1  # the client's GOAWAY
    assert log.take() == []


_LINE = st.tuples(st.integers(min_value=1, max_value=4), st.sampled_from(["frame", "closed"]))


@given(
    before=st.lists(_LINE, max_size=8),
    during=st.lists(_LINE, max_size=8),
    after=st.lists(_LINE, max_size=8),
)
def test_a_trial_has_the_frames_of_the_connections_that_began_in_it(
    before: list[tuple[int, str]], during: list[tuple[int, str]], after: list[tuple[int, str]]
) -> None:
    def line(connection: int, kind: str) -> str:
        if kind == "closed":
            return f"[id={connection}] [  1.000] closed"
        return (
            f"[id={connection}] [  1.000] recv PING frame <length=8, flags=0x00, "
            f"stream_id={connection}>"
        )

    log = ServerFrameLog()
    for connection, kind in before:
        log.feed(line(connection, kind))
    log.begin()
    for connection, kind in during:
        log.feed(line(connection, kind))
    log.end()
    for connection, kind in after:
        log.feed(line(connection, kind))
    earlier = {connection for connection, _kind in before}
    mine = {connection for connection, _kind in during} - earlier
    expected = [c for c, kind in (*during, *after) if c in mine and kind == "frame"]
    closed = {c for c, kind in (*during, *after) if c in mine and kind == "closed"}
    assert log.settled == (mine <= closed)
    assert [event.stream_id for event in log.take()] == expected
