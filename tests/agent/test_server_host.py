"""A server connection needs only its `ConnectionHost`: here a stand-in with exactly those
members, over a real loopback TCP connection with an h2 client, records what the connection
asks of it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import ConnectionTerminated, DataReceived, ResponseReceived, StreamEnded
from h2.settings import SettingCodes

from agent.limits import ConnectionLimits
from agent.protocols.in_force import SettingsExchange
from agent.server.connection import ServerConnection
from agent.server.handler import NOT_FOUND, Reply
from agent.server.host import HostedConnection
from agent.server.ledger import Note
from agent.server.lifecycle import State
from agent.server.request import Request
from agent.traffic import FrameCounts
from agent.trial_header import TRIAL_HEADER

BODY = bytes(range(256)) * 300


@dataclass
class StandInHost:
    h2_settings: Mapping[SettingCodes, int] = field(
        default_factory=lambda: {SettingCodes.MAX_CONCURRENT_STREAMS: 10}
    )
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    calls: list[tuple[object, ...]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    controlled_trial: str | None = None

    def handle(self, request: Request) -> Reply:
        self.requests.append(request)
        if request.path == "/body":
            return Reply(200, ((b"x-kind", b"test"),), memoryview(BODY))
        return NOT_FOUND

    def connection_opened(self, connection: HostedConnection) -> None:
        self.calls.append(("opened",))

    def connection_closed(self, connection: HostedConnection, failed: bool) -> None:
        self.calls.append(("closed", failed))
        self.closed.set()

    def trial_request(self, trial_id: str, connection_id: int) -> None:
        self.calls.append(("request", trial_id, connection_id))

    def trial_responses_done(self, trial_ids: Sequence[str]) -> None:
        self.calls.append(("done", *trial_ids))

    def trial_stream_reset(self, trial_id: str) -> None:
        self.calls.append(("reset", trial_id))

    def trial_noted(self, trial_id: str, note: Note) -> None:
        self.calls.append(("noted", trial_id, note.value))

    def trial_detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        *,
        settings: SettingsExchange | None,
    ) -> None:
        assert settings is not None and settings.received is not None
        assert settings.received["SETTINGS_INITIAL_WINDOW_SIZE"] >= 0
        assert sent.frames["DATA"] >= 1
        assert received.frames["HEADERS"] == 2
        self.calls.append(("detach", trial_id, connection_id))


async def _exchange(host: StandInHost, raw: bytes | None = None) -> dict[int, object]:
    """Run one connection: `raw` bytes as the client, or two GETs tagged as trial t; returns
    each stream's (headers, body)."""
    connections: list[ServerConnection] = []

    def made() -> ServerConnection:
        connections.append(ServerConnection(host, 7))
        return connections[-1]

    server = await asyncio.get_running_loop().create_server(made, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    responses: dict[int, list[object]] = {}
    if raw is not None:
        writer.write(raw)
    else:
        client.initiate_connection()
        for stream_id, method, path in ((1, b"GET", b"/body"), (3, b"HEAD", b"/body")):
            headers = [(b":method", method), (b":scheme", b"http"), (b":authority", b"x")]
            headers += [(b":path", path), (TRIAL_HEADER.encode(), b"t")]
            client.send_headers(stream_id, headers, end_stream=True)
            responses[stream_id] = [{}, bytearray()]
        writer.write(client.data_to_send())
    ended = 0
    while raw is None and ended < 2:
        data = await reader.read(65536)
        assert data
        for event in client.receive_data(data):
            if isinstance(event, ResponseReceived):
                responses[event.stream_id][0] = dict(event.headers)
            elif isinstance(event, DataReceived):
                responses[event.stream_id][1] += event.data  # type: ignore[operator]
                client.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                ended += 1
            assert not isinstance(event, ConnectionTerminated)
        writer.write(client.data_to_send())
    if raw is not None:
        await reader.read()  # the server's GOAWAY, then end of file
    writer.close()
    await asyncio.wait_for(host.closed.wait(), 20)
    server.close()
    await server.wait_closed()
    assert connections[0].lifecycle.state is State.CLOSED
    return {stream_id: tuple(value) for stream_id, value in responses.items()}


def test_a_connection_asks_its_host_and_nothing_else() -> None:
    async def scenario() -> tuple[StandInHost, dict[int, object]]:
        host = StandInHost()
        return host, await _exchange(host)

    host, responses = asyncio.run(scenario())
    get_headers, get_body = responses[1]  # type: ignore[misc]
    head_headers, head_body = responses[3]  # type: ignore[misc]
    assert get_headers[b":status"] == b"200" and get_headers[b"x-kind"] == b"test"
    assert bytes(get_body) == BODY
    assert head_headers[b"content-length"] == str(len(BODY)).encode() and not head_body
    assert [(r.method, r.path) for r in host.requests] == [(b"GET", "/body"), (b"HEAD", "/body")]
    assert host.requests[0].headers[TRIAL_HEADER.encode()] == b"t"
    assert host.calls[0] == ("opened",)
    assert host.calls[1:3] == [("request", "t", 7), ("request", "t", 7)]
    assert {call for call in host.calls if call[0] == "done"} == {("done", "t")}
    assert host.calls[-2:] == [("detach", "t", 7), ("closed", False)]


def test_a_broken_preface_closes_the_connection_as_failed() -> None:
    async def scenario() -> StandInHost:
        host = StandInHost()
        await _exchange(host, raw=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        return host

    host = asyncio.run(scenario())
    assert host.calls == [("opened",), ("closed", True)]
