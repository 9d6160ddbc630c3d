"""The receiver's ACK policy over HTTP/3 (agent.h3.ack_policy): the gate's rule, checked pair by
pair, and on the wire in memory: a client of ours receiving a transfer from qh3's server sends
an ACK per `ack_eliciting_threshold` packets (qh3's own core: one per two) and announces its
max_ack_delay. No test here depends on timing: `now` is the tests' own clock, and the delay is
long enough that only the threshold and the transfer's end release an ACK."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from qh3.quic.connection import QuicConnection
from qh3.quic.events import StreamDataReceived

from agent.errors import SettingsError
from agent.h3.ack_policy import (
    CHECKED_QH3,
    MAX_ACK_ELICITING_THRESHOLD,
    MAX_MAX_ACK_DELAY_MS,
    QH3_OWN,
    AckGate,
    AckPolicy,
)
from agent.h3.credit import CreditLedger
from agent.h3.settings import QuicWindows
from agent.h3.stack import TappedQuicConnection, TransportCounts, ack_gate, configuration, tap
from tests.agent.h3_peers import Credentials

CLIENT = ("127.0.0.1", 50000)
SERVER = ("127.0.0.1", 4433)
PACKET_BYTES = 1300  # stream data per full packet at the default 1350-byte datagram, about
TRANSFER_PACKETS = 60
LONG_DELAY_MS = 10_000  # no hold ends by time within a test's transfer


@pytest.mark.parametrize(
    ("threshold", "delay_ms"),
    [(1, 25), (MAX_ACK_ELICITING_THRESHOLD + 1, 25), (2, 0), (2, MAX_MAX_ACK_DELAY_MS + 1)],
)
def test_a_policy_outside_its_ranges_is_refused_naming_the_key(
    threshold: int, delay_ms: int
) -> None:
    with pytest.raises(SettingsError, match=r"^(ack_eliciting_threshold|max_ack_delay_ms) "):
        AckPolicy(threshold, delay_ms)


def test_qh3s_own_policy_needs_no_gate_and_another_is_refused_on_an_unread_qh3() -> None:
    assert QH3_OWN.gate(next(iter(CHECKED_QH3)), 1 << 20) is None
    assert isinstance(AckPolicy(10).gate(next(iter(CHECKED_QH3)), 1 << 20), AckGate)
    with pytest.raises(SettingsError, match=r"qh3 9\.9\.9"):
        AckPolicy(10).gate("9.9.9", 1 << 20)


def test_the_gate_holds_below_the_threshold_until_the_delay_and_opens_on_a_send() -> None:
    gate = AckGate(AckPolicy(3, 20), credit_bytes=10_000)
    assert not gate.holds(0.0)  # nothing received: nothing to hold back
    gate.received(1, 1300, 1.0)
    gate.received(0, 40, 1.001)  # a datagram that was no packet of the connection
    assert gate.holds(1.019) and gate.release_at == pytest.approx(1.02)
    assert not gate.holds(1.02)  # the first waited max_ack_delay
    gate.received(2, 2600, 1.005)
    assert not gate.holds(1.005)  # three packets: the threshold
    gate.sent()
    assert not gate.holds(1.006) and gate.release_at is None


def test_the_gate_never_holds_the_credit_half_a_window_asks_for() -> None:
    gate = AckGate(AckPolicy(100, 20), credit_bytes=4000)
    gate.received(3, 3900, 1.0)
    assert gate.holds(1.0)
    gate.received(1, 100, 1.0)
    assert not gate.holds(1.0)


def _client(
    credentials: Credentials, policy: AckPolicy, window_bytes: int = 1 << 22
) -> TappedQuicConnection:
    windows = QuicWindows(window_bytes, 2 * window_bytes, ack_policy=policy)
    config = configuration(
        windows,
        is_client=True,
        idle_timeout_s=60.0,
        ca_file=str(credentials.ca),
        server_name="localhost",
    )
    client = tap(
        QuicConnection(configuration=config),
        CreditLedger(),
        TransportCounts(),
        capacity_as_blocked=False,
        ack_gate=ack_gate(windows),
    )
    client.connect(SERVER, now=0.0)
    return client


def _server(credentials: Credentials, client: QuicConnection) -> QuicConnection:
    config = configuration(
        QuicWindows(1 << 22, 1 << 23),
        is_client=False,
        idle_timeout_s=60.0,
        cert=credentials.cert,
        key=credentials.key,
    )
    return QuicConnection(
        configuration=config,
        original_destination_connection_id=client.original_destination_connection_id,
    )


class _Pair:
    """A client of ours and qh3's server in memory, on the tests' clock."""

    def __init__(
        self, credentials: Credentials, policy: AckPolicy, window_bytes: int = 1 << 22
    ) -> None:
        self.client = _client(credentials, policy, window_bytes)
        self.server = _server(credentials, self.client)
        self.now = 0.0
        self.client_sent = 0  # datagrams
        self.client_ended = False  # received the end of a stream
        self.server_asked = False  # received a request stream's end

    def exchange(self) -> None:
        """Datagrams both ways until neither side has any now, the server's handed one at a
        time to the client and its sends looked for after each (as its socket would)."""
        client, server, now = self.client, self.server, self.now
        moved = True
        while moved:
            moved = False
            for data, _ in client.datagrams_to_send(now):
                server.receive_datagram(data, CLIENT, now)
                self.client_sent += 1
                moved = True
            for data, _ in server.datagrams_to_send(now):
                client.receive_datagram(data, SERVER, now)
                moved = True
                for reply, _ in client.datagrams_to_send(now):
                    server.receive_datagram(reply, CLIENT, now)
                    self.client_sent += 1
            while (event := client.next_event()) is not None:
                self.client_ended |= isinstance(event, StreamDataReceived) and event.end_stream
            while (event := server.next_event()) is not None:
                self.server_asked |= isinstance(event, StreamDataReceived) and event.end_stream

    def run_until(self, done: Callable[[], bool]) -> None:
        """Exchange, and while not `done`, run time to the next timer (the server paces and
        waits for ACKs) and the timers due."""
        self.exchange()
        while not done():
            # The client's deadline is its core's timer or the end of its ACK policy's hold.
            due = [t for t in (self.client.deadline(), self.server.get_timer()) if t is not None]
            self.now = max(self.now, min(due))
            for connection in (self.client, self.server):
                timer = connection.get_timer()
                if timer is not None and timer <= self.now:
                    connection.handle_timer(self.now)
            self.exchange()


def _handshaken(credentials: Credentials, policy: AckPolicy, window_bytes: int = 1 << 22) -> _Pair:
    pair = _Pair(credentials, policy, window_bytes)
    pair.run_until(lambda: pair.client._handshake_complete and pair.server._handshake_complete)
    return pair


def _transfer(credentials: Credentials, policy: AckPolicy, window_bytes: int = 1 << 22) -> _Pair:
    """The pair once the client received TRANSFER_PACKETS packets of one response, counting
    the datagrams the client sent since its request arrived."""
    pair = _handshaken(credentials, policy, window_bytes)
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_stream_data(stream_id, b"GET", end_stream=True)
    pair.run_until(lambda: pair.server_asked)
    pair.client_sent = 0
    pair.server.send_stream_data(stream_id, bytes(PACKET_BYTES * TRANSFER_PACKETS), end_stream=True)
    pair.run_until(lambda: pair.client_ended)
    return pair


def _client_datagrams_for_transfer(
    credentials: Credentials, policy: AckPolicy
) -> tuple[int, QuicConnection]:
    pair = _transfer(credentials, policy)
    return pair.client_sent, pair.server


@pytest.mark.parametrize("threshold", [2, 5, 10])
def test_the_client_acknowledges_once_per_threshold_packets(
    credentials: Credentials, threshold: int
) -> None:
    policy = AckPolicy(threshold, LONG_DELAY_MS)
    sent, server = _client_datagrams_for_transfer(credentials, policy)
    # One ACK per `threshold` packets (of 60: 30, 12 and 6 measured), plus at most two where
    # the server's flights (its congestion window) end short of a multiple.
    assert TRANSFER_PACKETS // threshold <= sent <= math.ceil(TRANSFER_PACKETS / threshold) + 2
    # Announced, so the server's probe timeout allows for it (RFC 9000 section 13.2.1).
    assert server._tls is not None and server._tls.remote_transport_parameters is not None
    assert server._tls.remote_transport_parameters.max_ack_delay == LONG_DELAY_MS


def test_qh3s_own_client_acknowledges_every_second_packet_and_announces_nothing(
    credentials: Credentials,
) -> None:
    sent, server = _client_datagrams_for_transfer(credentials, QH3_OWN)
    assert TRANSFER_PACKETS // 2 <= sent <= TRANSFER_PACKETS // 2 + 2
    assert server._tls is not None and server._tls.remote_transport_parameters is not None
    assert server._tls.remote_transport_parameters.max_ack_delay is None  # 25 ms, RFC 9000


def test_a_threshold_cuts_the_clients_acks_against_qh3s_own(credentials: Credentials) -> None:
    own, _ = _client_datagrams_for_transfer(credentials, QH3_OWN)
    tenth, _ = _client_datagrams_for_transfer(credentials, AckPolicy(10, LONG_DELAY_MS))
    assert tenth * 3 < own


def test_a_request_and_a_close_are_never_held(credentials: Credentials) -> None:
    """Stream data the client has to send and its CONNECTION_CLOSE go at once, whatever the
    gate counts."""
    pair = _handshaken(credentials, AckPolicy(MAX_ACK_ELICITING_THRESHOLD, LONG_DELAY_MS))
    client, server, now = pair.client, pair.server, pair.now
    # A packet from the server is waiting for its ACK: the gate would hold an ACK alone.
    server.send_ping(1)
    for data, _ in server.datagrams_to_send(now):
        client.receive_datagram(data, SERVER, now)
    assert client.datagrams_to_send(now) == []
    client.send_stream_data(client.get_next_available_stream_id(), b"GET", end_stream=True)
    assert len(client.datagrams_to_send(now)) == 1
    server.send_ping(2)
    for data, _ in server.datagrams_to_send(now):
        client.receive_datagram(data, SERVER, now)
    assert client.datagrams_to_send(now) == []
    client.close()
    assert len(client.datagrams_to_send(now)) == 1


def test_a_window_smaller_than_the_threshold_gets_its_credit_without_waiting(
    credentials: Credentials,
) -> None:
    """A 16 KiB window is about 12 packets: at threshold 1000 a hold would keep the sender
    waiting for credit the whole max_ack_delay (10 s on the tests' clock) every window; the
    gate lets the credit go at half the window, so the transfer needs no hold to end by
    time."""
    start = _handshaken(credentials, QH3_OWN).now  # the handshake alone, on the same clock
    pair = _transfer(credentials, AckPolicy(MAX_ACK_ELICITING_THRESHOLD, LONG_DELAY_MS), 16384)
    assert pair.now - start < LONG_DELAY_MS / 1000
