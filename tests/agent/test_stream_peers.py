"""The stream workload against real peers: `h2iot-agent trial` against `h2iot-agent serve` over
each transport; SSE read by curl and nghttp; WebSocket over HTTP/2 (RFC 8441) from our client
to hypercorn and from a bare h2 client to our server; gRPC between grpcio (the C core) and us
both ways; and what a hostile or broken subscriber gets: a stalled reader (drop or block, the
others unaffected), a garbage WebSocket frame (1002), an oversize gRPC message
(RESOURCE_EXHAUSTED), a subscriber gone mid-item, a trial cut short."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from wsproto.connection import Connection, ConnectionType
from wsproto.events import CloseConnection, TextMessage

from agent.workloads.stream import proto
from agent.workloads.stream.item import StreamEnd, Tune, decode_message
from agent.workloads.stream.sse import SseParser
from agent.workloads.stream.subscription import Subscription
from tests.agent import test_lifecycle
from tests.agent.servers import RunningServer, agent_server, run_agent
from tests.agent.stream_peers.grpc_server import Behaviour, grpc_server
from tests.agent.stream_peers.h2_client import H2Client
from tests.conftest import require_tool

# Short subscriptions: what is asserted is counts, never how long anything took.
RATE_HZ = 20.0
DURATION_S = 0.5
ITEMS = 10


def query(payload_doubles: int = 8, duration_s: float = DURATION_S, **extra: str) -> str:
    asked = Subscription(RATE_HZ, payload_doubles, duration_s, "json").query()
    return "&".join([asked, *(f"{k}={v}" for k, v in extra.items())])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(None, tmp_path_factory.mktemp("stream-server"), "--workload", "stream") as s:
        yield s


def trial(url: str, *params: str, timeout: float = 30) -> dict[str, Any]:
    args = ["trial", url, "--workload", "stream", "--json", "--timeout", str(timeout)]
    for param in (f"rate_hz={RATE_HZ}", f"duration_s={DURATION_S}", "payload_doubles=8", *params):
        args += ["--param", param]
    done = run_agent(*args)
    assert done.stdout, done.stderr
    record: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if record["ok"] else 1), done.stderr
    return record


def sse_messages(body: bytes) -> list[Tune | StreamEnd]:
    return [decode_message(e.data.encode(), "json") for e in SseParser(10**7).feed(body)]


def assert_all_items(messages: list[Tune | StreamEnd], items: int = ITEMS) -> None:
    *tunes, end = messages
    assert [t.seq for t in tunes if isinstance(t, Tune)] == list(range(items))
    assert end == StreamEnd(published=items, dropped=0)


# h2iot-agent trial against h2iot-agent serve --------------------------------------------------


@pytest.mark.parametrize("transport", ["sse", "websocket", "grpc", "poll"])
@pytest.mark.parametrize("encoding", ["json", "cbor"])
def test_a_trial_subscribes_end_to_end(
    server: RunningServer, transport: str, encoding: str
) -> None:
    record = trial(server.url, f"transport={transport}", f"encoding={encoding}")
    assert record["ok"], record["error"]
    metrics = record["metrics"]
    assert metrics["demanded_rate_hz"] == RATE_HZ
    assert metrics["items_dropped"] == 0 and metrics["items_repeated"] >= 0
    if transport == "poll":
        # Each poll gets the latest item (possibly the same one again); at most ITEMS polls,
        # fewer if some did not fit in duration_s.
        assert 1 <= metrics["items_received"] + metrics["items_repeated"] <= ITEMS
        assert metrics["items_published"] is None
    else:
        assert (metrics["items_received"], metrics["items_lost"]) == (ITEMS, 0)
        assert metrics["items_published"] == ITEMS
    assert 0 < metrics["latency_p50_s"] <= metrics["latency_p99_s"] <= metrics["latency_max_s"]
    assert metrics["payload_bytes"] > 8 * 8 * metrics["items_received"]
    assert metrics["received_rate_hz"] > 0
    assert record["item_encoding"] == ("protobuf" if transport == "grpc" else encoding)
    served = server.wait_for_trials(record["trial_id"])[record["trial_id"]]
    assert served["ok"] and served["workload"] == "stream"
    assert record["received"]["frames"]["DATA"] >= (1 if transport == "poll" else ITEMS)


certificate = test_lifecycle.certificate  # the fixture: a self-signed cert for 127.0.0.1


def test_every_transport_runs_over_tls(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    tls = ("--tls", "--cert", str(cert), "--key", str(key))
    with agent_server(None, tmp_path, "--workload", "stream", *tls) as server:
        url = f"https://127.0.0.1:{server.port}/"
        for transport in ("sse", "websocket", "grpc", "poll"):
            done = run_agent(
                "trial",
                url,
                "--workload",
                "stream",
                "--json",
                "--ca-file",
                str(cert),
                "--param",
                f"transport={transport}",
                "--param",
                "duration_s=0.2",
            )
            record = json.loads(done.stdout)
            assert record["ok"] and record["tls"], (transport, record["error"])
            assert record["metrics"]["items_received"] >= 1


def test_a_trial_cut_short_records_what_it_got(server: RunningServer) -> None:
    record = trial(server.url, "transport=sse", "duration_s=30", timeout=1.0)
    assert not record["ok"] and record["error"].startswith("timeout")
    assert record["metrics"]["items_received"] >= 1
    assert record["metrics"]["items_published"] is None


def test_a_bad_param_names_it(server: RunningServer) -> None:
    done = run_agent("trial", server.url, "--workload", "stream", "--param", "transport=mqtt")
    assert done.returncode == 2
    assert "--param transport: expected one of" in done.stderr


# SSE: curl and nghttp ---------------------------------------------------------------------------


def test_curl_reads_the_event_stream(server: RunningServer) -> None:
    require_tool("curl")
    url = f"{server.url}stream/sse?{query()}"
    done = subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", "-N", "-D", "-", url],
        capture_output=True,
        timeout=30,
        check=True,
    )
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/2 200") and b"content-type: text/event-stream" in head
    assert_all_items(sse_messages(body))


def test_nghttp_reads_the_event_stream(server: RunningServer) -> None:
    require_tool("nghttp")
    done = subprocess.run(
        ["nghttp", f"{server.url}stream/sse?{query()}"], capture_output=True, timeout=30, check=True
    )
    assert_all_items(sse_messages(done.stdout))


def test_a_bad_subscription_is_a_400_naming_the_param(server: RunningServer) -> None:
    require_tool("curl")
    url = f"{server.url}stream/sse?rate_hz=0&payload_doubles=1&duration_s=1"
    done = subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", "-w", "%{http_code}", url],
        capture_output=True,
        timeout=30,
        check=True,
        text=True,
    )
    assert done.stdout == "/stream/sse: rate_hz: 0.0 is outside 0.01..10000\n400"


# WebSocket over HTTP/2 (RFC 8441) ---------------------------------------------------------------


@contextmanager
def hypercorn(tmp: Path) -> Iterator[str]:
    """hypercorn serving tests.agent.stream_peers.asgi_app on a socket bound here (port 0)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    fd = listener.fileno()
    err = (tmp / "hypercorn.err").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.agent.stream_peers.run_hypercorn", str(fd)],
        pass_fds=(fd,),
        stdout=err,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        process.kill()  # its graceful shutdown waits on idle HTTP/2 connections; nothing to keep
        process.wait(timeout=20)
        listener.close()
        err.close()


@pytest.mark.parametrize("transport", ["websocket", "sse"])
def test_our_client_subscribes_to_hypercorn(tmp_path: Path, transport: str) -> None:
    with hypercorn(tmp_path) as url:
        record = trial(url, f"transport={transport}")
    assert record["ok"], (record["error"], (tmp_path / "hypercorn.err").read_text())
    metrics = record["metrics"]
    assert (metrics["items_received"], metrics["items_lost"], metrics["items_published"]) == (
        ITEMS,
        0,
        ITEMS,
    )


def test_our_client_reports_hypercorns_close_code(tmp_path: Path) -> None:
    with hypercorn(tmp_path) as url:
        record = trial(url + "close-1011/", "transport=websocket")
    assert not record["ok"]
    assert "closed by the server with" in record["error"] and "1011" in record["error"]


@pytest.mark.parametrize(
    ("transport", "hostile", "error"),
    [
        ("sse", "nesting", "not a json item: maximum recursion depth exceeded"),
        ("websocket", "nesting", "not a json item: maximum recursion depth exceeded"),
        ("sse", "value", "item 0: 'value' must be a number"),
        ("websocket", "stamp", "item 0: 't_ns' must be an integer in 0..2^64-1"),
    ],
)
def test_our_client_refuses_an_item_it_cannot_hold(
    tmp_path: Path, transport: str, hostile: str, error: str
) -> None:
    """A server's bytes that a decoder chokes on (a recursion, a number no double or clock
    holds) fail the trial with the reason, a record like any other (they were tracebacks)."""
    with hypercorn(tmp_path) as url:
        record = trial(
            url + f"hostile-{hostile}/", f"transport={transport}", "payload_doubles=1000"
        )
    assert not record["ok"] and record["error"].startswith(error), record["error"]
    assert record["metrics"]["items_received"] == 0


def websocket(client: H2Client, path: str) -> int:
    return client.open(
        "CONNECT",
        path,
        [(":protocol", "websocket"), ("sec-websocket-version", "13")],
        end_stream=False,
    )


def test_a_bare_h2_websocket_client_gets_every_item_and_the_close(server: RunningServer) -> None:
    client = H2Client(server.port)
    assert client.conn.remote_settings.enable_connect_protocol == 1
    stream_id = websocket(client, f"/stream/ws?{query()}")
    ws = Connection(ConnectionType.CLIENT)
    messages: list[Tune | StreamEnd] = []
    closed: list[CloseConnection] = []
    state = client.streams[stream_id]

    def read() -> bool:
        ws.receive_data(bytes(state.data))
        state.data.clear()
        for event in ws.events():
            if isinstance(event, TextMessage):
                messages.append(decode_message(event.data.encode(), "json"))
            elif isinstance(event, CloseConnection):
                closed.append(event)
                client.send_data(stream_id, ws.send(event.response()), end_stream=True)
        return bool(closed)

    client.pump(read)
    client.pump(lambda: state.ended)
    assert state.headers[b":status"] == b"200"
    assert closed[0].code == 1000
    assert_all_items(messages)
    client.close()


def test_a_garbage_websocket_frame_is_closed_with_1002(server: RunningServer) -> None:
    client = H2Client(server.port)
    stream_id = websocket(client, f"/stream/ws?{query(duration_s=30)}")
    state = client.streams[stream_id]
    client.pump(lambda: b":status" in state.headers)
    # A masked frame with reserved opcode 0x3: RFC 6455 says fail the connection.
    client.send_data(stream_id, b"\x83\x80\x00\x00\x00\x00")
    ws = Connection(ConnectionType.CLIENT)
    closes: list[CloseConnection] = []

    def read() -> bool:
        ws.receive_data(bytes(state.data))
        state.data.clear()
        closes.extend(e for e in ws.events() if isinstance(e, CloseConnection))
        return bool(closes)

    client.pump(read)
    assert closes[0].code == 1002
    client.pump(lambda: state.ended or state.reset_code is not None)
    client.close()
    assert trial(server.url, "transport=websocket")["ok"]  # the server carries on


# gRPC: grpcio both ways -------------------------------------------------------------------------


def grpcio_subscribe(port: int, request: bytes) -> tuple[list[bytes], grpc.Call]:
    with grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 2**26)]
    ) as channel:
        call = channel.unary_stream(proto.SUBSCRIBE_PATH)(request, timeout=30)
        return list(call), call


def test_grpcio_subscribes_to_our_server(server: RunningServer) -> None:
    asked = Subscription(RATE_HZ, 1000, DURATION_S, "protobuf")
    messages, call = grpcio_subscribe(server.port, proto.encode_subscription(asked))
    items = [proto.decode_tune(m) for m in messages]
    assert [t.seq for t in items] == list(range(ITEMS))
    assert all(len(t.doubles) == 1000 for t in items)
    trailers = dict(call.trailing_metadata())
    assert call.code() == grpc.StatusCode.OK
    assert (trailers["h2iot-items-published"], trailers["h2iot-items-dropped"]) == ("10", "0")


@pytest.mark.parametrize(
    ("request_bytes", "code", "message"),
    [
        (
            b"\x0a" * 5000,
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "RESOURCE_EXHAUSTED: gRPC message of 5000 bytes, more than the 4096",
        ),
        (
            proto.encode_subscription(Subscription(1.0, 3_000_000, 1.0, "protobuf")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "payload_doubles: 3000000 is outside",
        ),
        (b"\xff\xff", grpc.StatusCode.INTERNAL, "not a protobuf SubscribeRequest"),
    ],
)
def test_our_server_answers_grpcio_a_bad_request_with_its_status(
    server: RunningServer, request_bytes: bytes, code: grpc.StatusCode, message: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        grpcio_subscribe(server.port, request_bytes)
    error: Any = caught.value
    assert error.code() == code and message in error.details()


def test_our_client_subscribes_to_grpcio() -> None:
    with grpc_server(Behaviour()) as port:
        record = trial(f"http://127.0.0.1:{port}/", "transport=grpc")
    assert record["ok"], record["error"]
    metrics = record["metrics"]
    assert (metrics["items_received"], metrics["items_lost"], metrics["items_published"]) == (
        ITEMS,
        0,
        ITEMS,
    )


def test_an_oversize_message_from_grpcio_is_resource_exhausted() -> None:
    with grpc_server(Behaviour(oversize_doubles=100_000)) as port:
        record = trial(f"http://127.0.0.1:{port}/", "transport=grpc")
    assert not record["ok"]
    assert record["error"].startswith("RESOURCE_EXHAUSTED: gRPC message of 800")
    assert record["metrics"]["items_received"] == 1  # what came before it is kept


def test_a_grpcio_status_reaches_the_record() -> None:
    with grpc_server(Behaviour(abort_code=grpc.StatusCode.UNAVAILABLE)) as port:
        record = trial(f"http://127.0.0.1:{port}/", "transport=grpc")
    assert not record["ok"]
    assert record["error"] == "gRPC status UNAVAILABLE: the test server gives up"
    assert record["metrics"]["items_received"] == 1


def test_a_count_that_is_no_number_fails_the_trial_naming_it() -> None:
    with grpc_server(Behaviour(published_trailer="9" * 5000)) as port:
        record = trial(f"http://127.0.0.1:{port}/", "transport=grpc")
    assert not record["ok"]
    assert record["error"].startswith("gRPC: trailer h2iot-items-published '99999")
    assert record["error"].endswith("is not a count") and len(record["error"]) < 200
    assert record["metrics"]["items_received"] == ITEMS


# A subscriber that stops reading, or goes away ----------------------------------------------------


def stalled_subscription(port: int, payload_doubles: int, items: int) -> tuple[H2Client, int]:
    """An SSE subscription whose reader hands back no credit: after the first 64 KiB nothing
    more can reach it."""
    client = H2Client(port)
    client.acknowledging = False
    asked = Subscription(RATE_HZ, payload_doubles, items / RATE_HZ, "json")
    return client, client.open("GET", f"/stream/sse?{asked.query()}")


def read_out(client: H2Client, stream_id: int) -> list[Tune | StreamEnd]:
    client.acknowledging = True
    client.acknowledge(stream_id)
    state = client.streams[stream_id]
    client.pump(lambda: state.ended)
    client.close()
    return sse_messages(bytes(state.data))


@pytest.mark.parametrize("policy", ["drop", "block"])
def test_a_stalled_subscriber_costs_only_itself(tmp_path: Path, policy: str) -> None:
    """The healthy subscriber's whole stream (ten items of ten doubles) fits the buffer, so
    no pace of its reader can cost it an item; the stalled one's (twenty of about 19 KB) does
    not. Its reader comes back only after the healthy subscriber's last item, due at least
    0.55 s after its first (the healthy one starts after three of its items): the server's
    loop has then decided its items 0..11 (timers run in deadline order, however late the
    loop runs), and under drop some of those did not fit its 64 KiB window and the buffer."""
    settings = ("--param", f"backpressure={policy}", "--param", "buffer_bytes=65536")
    with agent_server(None, tmp_path, "--workload", "stream", *settings) as server:
        stalled, stream_id = stalled_subscription(server.port, 1000, items=20)
        stalled.pump(lambda: len(stalled.streams[stream_id].data) >= 65535)
        other = trial(server.url, "transport=sse", "payload_doubles=10")
        messages = read_out(stalled, stream_id)
        log = server.stderr()
    assert other["ok"], other["error"]
    assert (other["metrics"]["items_received"], other["metrics"]["items_dropped"]) == (ITEMS, 0)
    *tunes, end = messages
    assert isinstance(end, StreamEnd) and end.published == 20
    seqs = [t.seq for t in tunes if isinstance(t, Tune)]
    if policy == "drop":
        assert end.dropped > 0 and len(seqs) + end.dropped == 20
        assert seqs == sorted(seqs) and set(seqs) < set(range(20))
    else:
        assert (seqs, end.dropped) == (list(range(20)), 0)
    assert "Traceback" not in log


@pytest.mark.parametrize("transport", ["sse", "websocket", "grpc"])
def test_a_subscription_quieter_than_the_idle_timeout_keeps_its_connection(
    tmp_path: Path, transport: str
) -> None:
    """Items 1 s apart under a 0.4 s idle timeout: the stream is quiet at the server's pace, not
    idle, so every item arrives (the connection used to be closed after the first)."""
    with agent_server(None, tmp_path, "--workload", "stream", "--idle-timeout", "0.4") as server:
        args = ["trial", server.url, "--workload", "stream", "--json", "--timeout", "30"]
        for param in (f"transport={transport}", "rate_hz=1", "duration_s=2"):
            args += ["--param", param]
        done = run_agent(*args)
    record = json.loads(done.stdout)
    assert record["ok"], record["error"]
    metrics = record["metrics"]
    assert metrics["items_published"] == metrics["items_received"] == 2


def test_a_stalled_subscriber_is_still_closed_at_the_idle_timeout(tmp_path: Path) -> None:
    """Quiet for want of the peer's credit is idle: GOAWAY NO_ERROR, then the close."""
    with agent_server(None, tmp_path, "--workload", "stream", "--idle-timeout", "1") as server:
        stalled, stream_id = stalled_subscription(server.port, 1000, items=200)
        stalled.pump(lambda: len(stalled.streams[stream_id].data) >= 65535)
        with pytest.raises(ConnectionError, match="closed the connection"):
            stalled.pump(lambda: False)
        stalled.close()
    assert stalled.goaway_code == 0


def grpc_request(asked: Subscription) -> bytes:
    from agent.workloads.stream.grpcwire import frame_message  # noqa: PLC0415

    return frame_message(proto.encode_subscription(asked))


@pytest.mark.parametrize("transport", ["sse", "websocket", "grpc"])
def test_a_subscriber_gone_mid_item_costs_no_error_storm(tmp_path: Path, transport: str) -> None:
    # Items of about 4 MB: the connection goes away inside one.
    asked = Subscription(5.0, 200_000, 2.0, "json")
    with agent_server(None, tmp_path, "--workload", "stream") as server:
        for _ in range(3):
            client = H2Client(server.port)
            if transport == "sse":
                stream_id = client.open("GET", f"/stream/sse?{asked.query()}")
            elif transport == "websocket":
                stream_id = websocket(client, f"/stream/ws?{asked.query()}")
            else:
                stream_id = client.open(
                    "POST",
                    proto.SUBSCRIBE_PATH,
                    [("content-type", "application/grpc"), ("te", "trailers")],
                    end_stream=False,
                )
                client.send_data(stream_id, grpc_request(asked), end_stream=True)
            state = client.streams[stream_id]
            client.pump(lambda: len(state.data) > 100_000)  # noqa: B023 (used at once)
            client.sock.close()
        after = trial(server.url, f"transport={transport}")
        log = server.stderr()
    assert after["ok"], after["error"]
    assert "Traceback" not in log and "ERROR" not in log


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_stalled_subscriber_keeps_the_servers_memory_bounded(tmp_path: Path) -> None:
    """30 items of about 1.9 MB each (58 MB in all) published at a reader that takes none:
    under drop the server holds at most its bound and an item or two of them."""
    items, doubles = 30, 100_000
    with agent_server(None, tmp_path, "--workload", "stream") as server:
        trial(server.url, f"payload_doubles={doubles}", "duration_s=0.1")  # warm: the pool
        before = rss_bytes(server.process.pid)
        stalled, stream_id = stalled_subscription(server.port, doubles, items)
        time.sleep(items / RATE_HZ + 1.0)  # the publication is over (not a timing assertion)
        during = rss_bytes(server.process.pid)
        assert during - before < 16 * 2**20, (before, during)
        *tunes, end = read_out(stalled, stream_id)
    assert isinstance(end, StreamEnd) and end.published == items
    assert end.dropped >= items - 4 and len(tunes) + end.dropped == items
