"""An SSE subscriber that reconnects as an EventSource does (WHATWG HTML, server-sent events):
curl's HTTP/2 requests carrying Last-Event-ID against the real server. After the end event the
reconnect gets 204, which stops an EventSource (it used to get the whole publication again,
from item 0, every few seconds, forever); mid-way it resumes after the last item it got."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from agent.workloads.stream.item import StreamEnd, Tune, decode_message
from agent.workloads.stream.sse import Event, SseParser
from agent.workloads.stream.subscription import Subscription
from tests.agent.servers import agent_server
from tests.conftest import require_tool

RATE_HZ = 20.0
ITEMS = 10
SUBSCRIPTION = Subscription(RATE_HZ, 8, ITEMS / RATE_HZ, "json")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("stream-reconnect")
    with agent_server(None, tmp, "--workload", "stream") as server:
        yield f"{server.url}stream/sse?{SUBSCRIPTION.query()}"


def curl(url: str, last_event_id: str | None = None) -> tuple[bytes, bytes]:
    """The response's head and body, as an EventSource's (re)connection asks."""
    require_tool("curl")
    header = [] if last_event_id is None else ["-H", f"Last-Event-ID: {last_event_id}"]
    command = ["curl", "-sS", "--http2-prior-knowledge", "-N", "-D", "-", *header, url]
    done = subprocess.run(command, capture_output=True, timeout=30, check=True)
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    return head, body


def events(body: bytes) -> list[Event]:
    return SseParser(10**6).feed(body)


def seqs(got: list[Event]) -> list[int]:
    messages = [decode_message(e.data.encode(), "json") for e in got]
    return [m.seq for m in messages if isinstance(m, Tune)]


def end_of(got: list[Event]) -> StreamEnd:
    end = decode_message(got[-1].data.encode(), "json")
    assert got[-1].event == "end" and isinstance(end, StreamEnd)
    return end


def test_the_stream_sets_the_reconnection_time_and_ids_its_end(url: str) -> None:
    head, body = curl(url)
    assert head.startswith(b"HTTP/2 200")
    assert body.startswith(b"retry: 1000\nid: 0\n")
    assert body.endswith(
        b'retry: 1000\nid: end\nevent: end\ndata: {"published":10,"dropped":0}\n\n'
    )
    got = events(body)
    assert seqs(got) == list(range(ITEMS))
    assert [e.id for e in got] == [*map(str, range(ITEMS)), "end"]
    assert end_of(got) == StreamEnd(ITEMS, 0)


def test_a_reconnect_after_the_end_gets_204_and_stops(url: str) -> None:
    last_event_id = events(curl(url)[1])[-1].id  # what an EventSource would send back
    assert last_event_id is not None
    head, body = curl(url, last_event_id)
    assert head.startswith(b"HTTP/2 204") and body == b""


@pytest.mark.parametrize("last", [0, 6, ITEMS - 1])
def test_a_reconnect_mid_way_resumes_after_the_last_item(url: str, last: int) -> None:
    head, body = curl(url, str(last))
    assert head.startswith(b"HTTP/2 200") and body.startswith(b"retry: 1000\nid: ")
    got = events(body)
    assert seqs(got) == list(range(last + 1, ITEMS))
    assert end_of(got) == StreamEnd(ITEMS, 0)  # the subscription's count, not this response's


@pytest.mark.parametrize("last_event_id", [str(ITEMS), "-1", "7x", "1_0"])
def test_an_id_that_is_none_of_the_subscriptions_is_a_400(url: str, last_event_id: str) -> None:
    head, body = curl(url, last_event_id)
    assert head.startswith(b"HTTP/2 400")
    assert body.decode().startswith(f"/stream/sse: Last-Event-ID: {last_event_id!r} is")
