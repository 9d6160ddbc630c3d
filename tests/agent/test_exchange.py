"""The exchange seam for real: our server with a handler of the tests' own
(tests/agent/exchange_server.py) driven by curl, nghttp, h2load and our own client's
`TrialSession.call` / `exchange`, over loopback."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from agent.client.connect import Target, open_connection
from agent.client.options import TrialOptions
from agent.client.trial import TrialSession
from agent.errors import ExchangeClosed, ExchangeRefused, UsageError
from agent.h2.flow import FlowControlOptions
from agent.server.app import handler_settings
from agent.server.handler import NOT_FOUND, Reply, Streamed
from agent.server.request import Request
from tests.agent.servers import agent_server, listening_line

SERVER_SCRIPT = Path(__file__).with_name("exchange_server.py")
HYPERCORN_SCRIPT = Path(__file__).with_name("hypercorn_ws_server.py")
LIMITED_BYTES = 1000  # exchange_server.LIMITED_BYTES
T = TypeVar("T")

needs_nghttp2 = pytest.mark.skipif(
    not os.environ.get("CI") and shutil.which("h2load") is None,
    reason="nghttp2's tools (nghttp, h2load) are not installed (Debian nghttp2-client)",
)
needs_curl = pytest.mark.skipif(
    not os.environ.get("CI") and shutil.which("curl") is None,
    reason="curl is not installed",
)


@dataclass
class ExchangeServer:
    process: subprocess.Popen[str]
    port: int
    stderr_path: Path
    trial_log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def trial(self, trial_id: str) -> dict[str, object]:
        """The trial's record, written once its connection has closed."""
        deadline = time.monotonic() + 20  # a hang guard, not a timing assertion
        while time.monotonic() < deadline:
            if self.trial_log.exists():
                for line in self.trial_log.read_text().splitlines():
                    record = json.loads(line)
                    if record["trial_id"] == trial_id:
                        return dict(record)
            time.sleep(0.02)
        raise AssertionError(f"no record of trial {trial_id} in {self.trial_log}")


@contextmanager
def exchange_server(tmp: Path, *settings: str) -> Iterator[ExchangeServer]:
    name = f"seam-exchange-server-{len(list(tmp.iterdir()))}"
    stderr_path = tmp / f"{name}.err"
    trial_log = tmp / f"{name}-trials.jsonl"
    args = [sys.executable, str(SERVER_SCRIPT), "--trial-log", str(trial_log)]
    for setting in settings:
        args += ["--setting", setting]
    with stderr_path.open("w") as err:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        listening = listening_line(stderr_path, process)
        yield ExchangeServer(process, int(listening["port"]), stderr_path, trial_log)
    finally:
        process.terminate()
        process.wait(timeout=40)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExchangeServer]:
    with exchange_server(tmp_path_factory.mktemp("seam-exchange")) as running:
        yield running


@pytest.fixture(scope="module")
def small_window_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExchangeServer]:
    """Announces a 256-byte stream window: uploads to it are paced by its reader."""
    tmp = tmp_path_factory.mktemp("seam-exchange-256")
    with exchange_server(tmp, "initial_window_size=256") as running:
        yield running


def run_session(
    url: str,
    scenario: Callable[[TrialSession], Awaitable[T]],
    options: TrialOptions | None = None,
    trial_id: str = "seam-t",
) -> T:
    """`scenario` on a fresh connection of our client (its requests tagged `trial_id`),
    closed afterwards."""

    async def main() -> T:
        target = Target.parse(url + "/")
        connection = await open_connection(target, options or TrialOptions())
        try:
            session = TrialSession(connection, target, trial_id)
            return await asyncio.wait_for(scenario(session), 60)
        finally:
            await connection.close()

    return asyncio.run(main())


def random_body(size: int) -> bytes:
    return os.urandom(size)


# curl, nghttp, h2load ---------------------------------------------------------------------------


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def curl_status(body: bytes, url: str, tmp: Path) -> tuple[int, str]:
    """curl's exit status and the HTTP status of POSTing `body` to `url`."""
    (tmp / "body").write_bytes(body)
    result = curl("-o", "/dev/null", "-w", "%{http_code}", "--data-binary", f"@{tmp / 'body'}", url)
    return result.returncode, result.stdout


@needs_curl
def test_curl_post_body_arrives_exactly(server: ExchangeServer, tmp_path: Path) -> None:
    body = random_body(300_000)  # several windows: the handler's reading paces the upload
    (tmp_path / "body").write_bytes(body)
    result = curl(
        *("-D", str(tmp_path / "head"), "-o", str(tmp_path / "echo")),
        *("--data-binary", f"@{tmp_path / 'body'}", f"{server.url}/echo"),
    )
    assert result.returncode == 0, result.stderr
    head = (tmp_path / "head").read_text().lower()
    assert "http/2 200" in head
    assert f"x-body-sha256: {hashlib.sha256(body).hexdigest()}" in head
    assert (tmp_path / "echo").read_bytes() == body


@needs_curl
@pytest.mark.parametrize("path", ["/limited", "/read-limit"])
def test_curl_body_over_the_limit_is_answered_413(
    server: ExchangeServer, tmp_path: Path, path: str
) -> None:
    """/limited: by content-length, before the handler runs; /read-limit: the handler's
    read_body. The body fits in curl's first flight, so no reset follows the 413."""
    url = f"{server.url}{path}"
    assert curl_status(random_body(5 * LIMITED_BYTES), url, tmp_path) == (0, "413")
    assert curl_status(random_body(LIMITED_BYTES), url, tmp_path) == (0, "200")


@needs_nghttp2
def test_nghttp_large_body_over_the_limit_gets_413_then_a_reset(
    server: ExchangeServer, tmp_path: Path
) -> None:
    """A body larger than the window cannot have ended when the 413 goes: RST_STREAM(NO_ERROR)
    asks nghttp to stop sending (RFC 9113 section 8.1), and the connection keeps working."""
    (tmp_path / "body").write_bytes(random_body(200_000))
    result = subprocess.run(
        ["nghttp", "-v", "-d", str(tmp_path / "body"), f"{server.url}/limited"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = result.stdout
    assert ":status: 413" in out
    assert "error_code=NO_ERROR" in out.split(":status: 413", 1)[1]
    assert "RST_STREAM" in out
    # Never buffered: the body stops within a window or so of the limit.
    sent = sum(int(n) for n in re.findall(r"send DATA frame <length=(\d+)", out))
    assert sent < 200_000


@needs_nghttp2
def test_nghttp_reads_a_streamed_response_with_trailers(server: ExchangeServer) -> None:
    chunks, size = 20, 5000
    expected = hashlib.sha256(b"".join(bytes([i]) * size for i in range(chunks))).hexdigest()
    result = subprocess.run(
        ["nghttp", "-v", f"{server.url}/stream?chunks={chunks}&size={size}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = result.stdout
    received = sum(int(n) for n in re.findall(r"recv DATA frame <length=(\d+)", out))
    assert received == chunks * size
    trailer = out.split(f"x-sha256: {expected}", 1)
    assert len(trailer) == 2, out[-2000:]
    assert "x-done: yes" in trailer[1]
    # The trailers' HEADERS frame ends the stream.
    assert re.search(r"recv HEADERS frame <length=\d+, flags=0x05", trailer[1])


@needs_nghttp2
def test_h2load_against_a_streamed_handler(server: ExchangeServer, tmp_path: Path) -> None:
    (tmp_path / "body").write_bytes(random_body(3000))
    for extra, path in (
        ([], "/stream?chunks=4&size=1000"),
        (["-d", str(tmp_path / "body")], "/echo"),
    ):
        result = subprocess.run(
            ["h2load", "-n", "400", "-c", "4", "-m", "10", *extra, f"{server.url}{path}"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert "400 succeeded, 0 failed, 0 errored" in result.stdout, result.stdout
        assert "status codes: 400 2xx" in result.stdout


# our client -------------------------------------------------------------------------------------


def test_call_uploads_a_body_and_gets_the_whole_response(server: ExchangeServer) -> None:
    body = random_body(250_000)

    async def scenario(session: TrialSession) -> None:
        response = await session.call(b"PUT", "/echo", body=body)
        assert response.status == 200
        assert response.headers[b"x-body-sha256"] == hashlib.sha256(body).hexdigest().encode()
        assert response.body == body and response.size_bytes == len(body)
        assert response.digest.hexdigest() == hashlib.sha256(body).hexdigest()
        assert response.trailers is None
        assert response.t_request_ns < response.t_headers_ns <= response.t_end_ns
        streamed = await session.call(b"GET", "/stream?chunks=3&size=10")
        assert streamed.body == b"\0" * 10 + b"\1" * 10 + b"\2" * 10
        assert streamed.trailers is not None and streamed.trailers[b"x-done"] == b"yes"
        over = await session.call(b"POST", "/limited", body=random_body(200_000))
        assert over.status == 413
        # The refused upload left the connection's window whole: another upload goes through.
        again = await session.call(b"POST", "/echo", body=body)
        assert again.body == body

    run_session(server.url, scenario)


def test_request_fast_path_takes_trailers_after_a_content_length_body(
    server: ExchangeServer,
) -> None:
    """A GET through `TrialSession.request` (the fast path hashes its DATA without h2): the
    trailers' END_STREAM is judged by h2 against content-length, so its count must be right."""
    chunks, size = 6, 30_000

    async def scenario(session: TrialSession) -> None:
        url = f"/stream?chunks={chunks}&size={size}&length=1"
        response = await session.request(url, keep_body=True)
        assert response.status == 200 and response.size_bytes == chunks * size
        assert response.trailers is not None
        assert response.trailers[b"x-sha256"] == response.digest.hexdigest().encode()

    run_session(server.url, scenario)


def test_exchanges_count_in_the_servers_trial_record(server: ExchangeServer) -> None:
    """A response through an exchange is done when its last frame is written (END_STREAM on
    DATA, trailers, a 413's HEADERS), a reset one counts as reset, like a Reply's."""

    async def scenario(session: TrialSession) -> None:
        assert (await session.call(b"POST", "/echo", body=b"abc")).status == 200
        assert (await session.call(b"GET", "/stream")).trailers is not None
        assert (await session.call(b"POST", "/limited", body=b"x" * 5000)).status == 413
        assert (await session.call(b"GET", "/plain")).status == 200
        with pytest.raises(ExchangeClosed):
            await session.call(b"GET", "/raise")

    run_session(server.url, scenario, trial_id="seam-trial-record")
    record = server.trial("seam-trial-record")
    assert (record["requests"], record["responses_completed"], record["streams_reset"]) == (5, 4, 1)
    received = record["received"]
    assert isinstance(received, dict) and received["frames"]["DATA"] >= 2


def test_upload_is_paced_by_a_256_byte_server_window(small_window_server: ExchangeServer) -> None:
    body = random_body(20_000)

    async def scenario(session: TrialSession) -> tuple[int, int, bytes]:
        await session.concurrency_limit()  # the server's SETTINGS (its 256-byte window) are in
        connection = session.connection
        before = connection.tally_in.counts().frames.get("WINDOW_UPDATE", 0)
        exchange = session.exchange(b"POST", "/count", end_stream=False)
        exchange.send(body, end_stream=True)
        await exchange.drain()
        status, headers = await exchange.response_head()
        assert status == 200
        total = await exchange.receive()
        assert total is not None
        updates = connection.tally_in.counts().frames.get("WINDOW_UPDATE", 0) - before
        return updates, int(headers[b"x-chunks"]), total

    updates, chunks, total = run_session(small_window_server.url, scenario)
    assert total == str(len(body)).encode()
    # Every DATA frame fit a 256-byte window, and each was credited only after it was read.
    assert chunks >= len(body) // 256
    assert updates >= len(body) // 256


def test_a_reader_that_stops_stalls_the_sender(small_window_server: ExchangeServer) -> None:
    """/hold never reads its body: the server's 256-byte window is all the client can send,
    the rest stays buffered, drain waits; a reset ends the wait with ExchangeClosed."""
    body = random_body(10_000)

    async def scenario(session: TrialSession) -> None:
        await session.concurrency_limit()  # the server's SETTINGS (its 256-byte window) are in
        exchange = session.exchange(b"POST", "/hold", end_stream=False)
        exchange.send(body)
        drain = asyncio.ensure_future(exchange.drain())
        status, _headers = await exchange.response_head()
        assert status == 200
        assert await exchange.receive() == b"held"
        # Round trips with the server (its PING ACKs) while nothing is read there.
        for _ in range(5):
            await ping(session)
        assert exchange.buffered_bytes == len(body) - 256
        assert not drain.done()
        exchange.send(body)  # never blocks: the queue grows
        assert exchange.buffered_bytes == 2 * len(body) - 256
        exchange.reset()
        with pytest.raises(ExchangeClosed):
            await drain
        with pytest.raises(ExchangeClosed):
            exchange.send(b"x")

    run_session(small_window_server.url, scenario)


async def ping(session: TrialSession) -> None:
    """One round trip: a PING and its ACK, through h2."""
    connection = session.connection
    acked = connection.tally_in.counts().frames.get("PING", 0)
    connection.conn.ping(os.urandom(8))
    connection._flush()
    while connection.tally_in.counts().frames.get("PING", 0) == acked:
        await asyncio.sleep(0.005)


def test_a_client_that_stops_reading_stalls_the_server(server: ExchangeServer) -> None:
    """/flood sends 64 x 4 KiB, waiting in drain() whenever more than 16 KiB is queued: with a
    1 KiB client window and a reader that pauses, the server's queue fills and drain waits;
    reading on lets everything through."""
    settings = {"initial_window_size": 1024}
    options = TrialOptions(settings=settings, flow=FlowControlOptions(connection_window=65535))

    async def scenario(session: TrialSession) -> dict[bytes, bytes]:
        exchange = session.exchange(b"GET", "/flood?size=4096")
        await exchange.response_head()
        for _ in range(5):
            await ping(session)
        received = 0
        while (chunk := await exchange.receive()) is not None:
            received += len(chunk)
        assert received == 64 * 4096
        assert exchange.trailers is not None
        return dict(exchange.trailers)

    trailers = run_session(server.url, scenario, options)
    assert int(trailers[b"x-sent"]) == 64 * 4096
    assert int(trailers[b"x-drain-waits"]) >= 1
    assert int(trailers[b"x-highest-buffered"]) > 4 * 4096


def test_extended_connect_round_trip(server: ExchangeServer) -> None:
    """RFC 8441: the stream opens once the server's SETTINGS (enable_connect_protocol=1) are
    in, even when asked before they arrive; both directions then flow on it."""

    async def scenario(session: TrialSession) -> None:
        exchange = session.exchange(
            b"CONNECT", "/ws", [(b":protocol", b"websocket")], end_stream=False
        )
        status, headers = await exchange.response_head()
        assert status == 200 and headers[b"sec-websocket-protocol"] == b"echo"
        echoed = b""
        for message in (b"hello", b"x" * 40_000, b"bye"):
            exchange.send(message)
            while len(echoed) < len(message):
                chunk = await exchange.receive()
                assert chunk is not None
                echoed += chunk
            assert echoed == message
            echoed = b""
        exchange.end()
        assert await exchange.receive() is None
        assert exchange.trailers == {b"x-echoed": str(40_008).encode()}

    run_session(server.url, scenario)


class _PlainHandler:
    def handle(self, request: Request) -> Reply | Streamed:
        return NOT_FOUND


class _SettingsHandler:
    def __init__(self, extra_settings: dict[str, int]) -> None:
        self.extra_settings = extra_settings

    def handle(self, request: Request) -> Reply | Streamed:
        return NOT_FOUND


def test_handler_extra_settings_map_to_h2_codes_and_unknown_names_are_refused() -> None:
    codes = handler_settings(_SettingsHandler({"enable_connect_protocol": 1}))
    assert {code.name: value for code, value in codes.items()} == {"ENABLE_CONNECT_PROTOCOL": 1}
    assert handler_settings(_PlainHandler()) == {}
    with pytest.raises(UsageError, match="_SettingsHandler: unknown HTTP/2 setting 'bogus'"):
        handler_settings(_SettingsHandler({"bogus": 1}))


def test_extended_connect_is_refused_when_the_server_does_not_enable_it(tmp_path: Path) -> None:
    async def scenario(session: TrialSession) -> None:
        exchange = session.exchange(
            b"CONNECT", "/ws", [(b":protocol", b"websocket")], end_stream=False
        )
        with pytest.raises(ExchangeRefused, match="SETTINGS_ENABLE_CONNECT_PROTOCOL"):
            await exchange.response_head()

    with agent_server(None, tmp_path, "--workload", "blob") as blob_server:
        run_session(f"http://127.0.0.1:{blob_server.port}", scenario)


def test_failing_handlers_reset_their_stream_and_the_server_serves_on(
    tmp_path: Path,
) -> None:
    async def scenario(session: TrialSession) -> None:
        for path in ("/raise", "/forget", "/raise"):
            exchange = session.exchange(b"GET", path)
            with pytest.raises(ExchangeClosed, match="INTERNAL_ERROR"):
                await exchange.response_head()
                await exchange.receive()
        plain = await session.call(b"GET", "/plain")
        assert plain.body == b"plain reply"
        streamed = await session.call(b"GET", "/stream")
        assert streamed.status == 200 and streamed.trailers is not None

    with exchange_server(tmp_path) as running:
        run_session(running.url, scenario)
        run_session(running.url, scenario)
        log = running.stderr()
    # Logged once per connection (two connections), with the handler's traceback.
    assert log.count("the handler of GET /raise") == 2
    assert log.count("RuntimeError: the test handler fails on purpose") == 4  # line + traceback
    assert "the handler of GET /forget" not in log


def test_a_peer_reset_mid_upload_ends_receive_quietly(tmp_path: Path) -> None:
    """The handler blocked in receive() gets ExchangeClosed; the connection goes on, and
    nothing is logged but the handler's own line."""

    async def scenario(session: TrialSession) -> None:
        for _ in range(3):
            exchange = session.exchange(b"POST", "/echo", end_stream=False)
            exchange.send(b"part of a body")
            await exchange.drain()
            await ping(session)
            exchange.reset()
        again = await session.call(b"POST", "/echo", body=b"whole")
        assert again.body == b"whole"

    with exchange_server(tmp_path) as running:
        run_session(running.url, scenario)
        log = running.stderr()
    assert log.count("echo: receive raised ExchangeClosed") == 3
    assert "Traceback" not in log and "reset storm" not in log


def websocket_frame(opcode: int, payload: bytes) -> bytes:
    """One client WebSocket frame (RFC 6455 section 5.2: FIN set, masked), payload < 64 KiB."""
    mask = os.urandom(4)
    size = len(payload)
    length = bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + struct.pack(">H", size)
    masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
    return bytes([0x80 | opcode]) + length + mask + masked


@pytest.mark.skipif(
    not os.environ.get("CI") and importlib.util.find_spec("hypercorn") is None,
    reason="hypercorn is not installed (the `test` extra has it)",
)
def test_extended_connect_to_hypercorn_websocket() -> None:
    """Our client against another RFC 8441 implementation: hypercorn's WebSocket over HTTP/2
    (an ASGI echo app), frames written and read by hand."""
    process = subprocess.Popen(
        [sys.executable, str(HYPERCORN_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())

        async def scenario(session: TrialSession) -> None:
            exchange = session.exchange(
                b"CONNECT",
                "/ws",
                [(b":protocol", b"websocket"), (b"sec-websocket-version", b"13")],
                end_stream=False,
            )
            status, headers = await exchange.response_head()
            assert status == 200 and headers[b"server"] == b"hypercorn-h2"
            for opcode, payload in ((0x2, b"binary hello"), (0x1, b"text " * 40)):
                exchange.send(websocket_frame(opcode, payload))
                expected = bytes([0x80 | opcode]) + (
                    bytes([len(payload)])
                    if len(payload) < 126
                    else b"\x7e" + struct.pack(">H", len(payload))
                )
                echoed = b""
                while len(echoed) < len(expected) + len(payload):
                    chunk = await exchange.receive()
                    assert chunk is not None
                    echoed += chunk
                assert echoed == expected + payload
            exchange.send(websocket_frame(0x8, struct.pack(">H", 1000)))
            assert await exchange.receive() == b"\x88\x02" + struct.pack(">H", 1000)
            exchange.reset()

        run_session(f"http://127.0.0.1:{port}", scenario)
    finally:
        process.terminate()
        process.wait(timeout=20)
