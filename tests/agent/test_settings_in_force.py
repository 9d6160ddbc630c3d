"""Settings in force: what each side announced and received, read from real h2 and qh3
connections joined in memory, and the mismatches against a point's settings (pure)."""

from __future__ import annotations

from h2.events import RequestReceived
from hypothesis import given
from hypothesis import strategies as st
from qh3.h3.connection import H3Connection
from qh3.quic.connection import QuicConnection

from agent.engines.nghttp2.gtls import GtlsOptions
from agent.engines.nghttp2.options import NghttpOptions
from agent.h2.connection import h2_connection, initiate_server
from agent.h2.settings import SETTING_SPECS, by_protocol_name, settings_exchange, to_h2
from agent.h3.settings import H3_COUNTERPARTS, QuicWindows
from agent.h3.stack import AnnouncingH3, configuration
from agent.h3.stack import settings_exchange as h3_settings_exchange
from agent.protocols import PROTOCOLS
from agent.protocols.in_force import SettingMismatch, SettingsExchange, in_force_keys, mismatches
from tests.agent.h3_peers import Credentials

CLIENT_ADDRESS = ("127.0.0.1", 50000)
SERVER_ADDRESS = ("127.0.0.1", 4433)


def test_h2_each_side_receives_what_the_other_announced() -> None:
    client = h2_connection(True, to_h2({"initial_window_size": 4096, "header_table_size": 0}))
    server = h2_connection(False, to_h2({"initial_window_size": 1 << 20, "max_frame_size": 32768}))
    client.initiate_connection()
    server.initiate_connection()
    assert settings_exchange(client, peer_settings_seen=False).received is None
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    ours, theirs = settings_exchange(client, True), settings_exchange(server, True)
    assert ours.announced["SETTINGS_INITIAL_WINDOW_SIZE"] == 4096
    assert ours.announced["SETTINGS_HEADER_TABLE_SIZE"] == 0
    assert ours.received is not None and theirs.received is not None
    assert ours.received["SETTINGS_INITIAL_WINDOW_SIZE"] == 1 << 20
    assert ours.received["SETTINGS_MAX_FRAME_SIZE"] == 32768
    assert ours.received["SETTINGS_HEADER_TABLE_SIZE"] == 4096  # the server left h2's default
    assert theirs.received == ours.announced
    assert ours.received == theirs.announced


def test_an_h2_setting_h2_does_not_know_is_named_by_its_identifier() -> None:
    client = h2_connection(True, {})
    client.remote_settings.update({0x99: 7})
    client.remote_settings.acknowledge()
    assert by_protocol_name(client.remote_settings)["0x99"] == 7


def _h3_pair(
    credentials: Credentials, client_windows: QuicWindows, server_windows: QuicWindows
) -> tuple[tuple[QuicConnection, H3Connection], tuple[QuicConnection, H3Connection]]:
    """A qh3 client and server, each with our HTTP/3 layer, after their handshakes and
    SETTINGS, datagrams passed in memory."""
    client = QuicConnection(
        configuration=configuration(
            client_windows, is_client=True, idle_timeout_s=5.0, ca_file=str(credentials.ca),
            server_name="localhost",
        )
    )  # fmt: skip
    server = QuicConnection(
        configuration=configuration(
            server_windows, is_client=False, idle_timeout_s=5.0, cert=credentials.cert,
            key=credentials.key,
        ),
        original_destination_connection_id=client.original_destination_connection_id,
    )  # fmt: skip
    client_h3 = AnnouncingH3(client, client_windows)
    server_h3: H3Connection | None = None
    client.connect(SERVER_ADDRESS, now=0.0)
    now = 0.0
    for _ in range(10):
        now += 0.001
        for data, _ in client.datagrams_to_send(now):
            server.receive_datagram(data, CLIENT_ADDRESS, now)
        while (event := server.next_event()) is not None:
            server_h3 = server_h3 or AnnouncingH3(server, server_windows)
            server_h3.handle_event(event)
        for data, _ in server.datagrams_to_send(now):
            client.receive_datagram(data, SERVER_ADDRESS, now)
        while (event := client.next_event()) is not None:
            client_h3.handle_event(event)
    assert server_h3 is not None
    return (client, client_h3), (server, server_h3)


def test_h3_each_side_receives_the_transport_parameters_and_settings_the_other_announced(
    credentials: Credentials,
) -> None:
    client_windows = QuicWindows(4096, 1 << 20, qpack_max_table_capacity=0)
    server_windows = QuicWindows(65535, 1 << 21, qpack_max_table_capacity=4096)
    (client, client_h3), (server, server_h3) = _h3_pair(credentials, client_windows, server_windows)
    ours = h3_settings_exchange(client, client_h3)
    theirs = h3_settings_exchange(server, server_h3)
    assert ours.announced["initial_max_stream_data_bidi_local"] == 4096
    assert ours.announced["initial_max_data"] == 1 << 20
    assert ours.announced["SETTINGS_QPACK_MAX_TABLE_CAPACITY"] == 0
    assert ours.received is not None and theirs.received is not None
    assert ours.received["initial_max_stream_data_bidi_remote"] == 65535
    assert ours.received["initial_max_data"] == 1 << 21
    assert ours.received["SETTINGS_QPACK_MAX_TABLE_CAPACITY"] == 4096
    assert "SETTINGS_QPACK_BLOCKED_STREAMS" in ours.received
    assert theirs.received == ours.announced
    assert ours.received == theirs.announced


def test_h3_received_is_unobserved_until_the_peer_has_spoken(credentials: Credentials) -> None:
    windows = QuicWindows(65535, 1 << 20)
    client = QuicConnection(
        configuration=configuration(windows, is_client=True, idle_timeout_s=5.0, insecure=True)
    )
    client_h3 = AnnouncingH3(client, windows)
    unconnected = h3_settings_exchange(client, client_h3)
    # qh3's layer writes its SETTINGS when made; its QUIC handshake has not started.
    assert unconnected.received is None
    assert not any(name.startswith("initial_max") for name in unconnected.announced)
    # Not asked for a capacity, qh3 announces its own.
    assert unconnected.announced["SETTINGS_QPACK_MAX_TABLE_CAPACITY"] == 65536
    client.connect(SERVER_ADDRESS, now=0.0)
    before = h3_settings_exchange(client, client_h3)
    assert before.received is None
    assert before.announced["initial_max_stream_data_bidi_local"] == 65535


def test_a_window_in_force_as_asked_is_no_mismatch_over_any_protocol() -> None:
    for protocol in PROTOCOLS:
        client_key, server_key = in_force_keys(protocol)["initial_window_size"]
        exchange = SettingsExchange({client_key: 65535}, {server_key: 65535})
        assert mismatches(protocol, {"initial_window_size": 65535}, exchange) == ()


def test_nghttps_window_is_2_to_the_n_minus_1_and_flagged_on_the_side_announcing_it() -> None:
    options = NghttpOptions.create({"initial_window_size": 4096}, 4096, "map")
    announced = options.settings_announced()
    assert announced["SETTINGS_INITIAL_WINDOW_SIZE"] == 4095
    found = mismatches("h2c", {"initial_window_size": 4096}, SettingsExchange(announced, None))
    assert found == (
        SettingMismatch(
            "initial_window_size", "SETTINGS_INITIAL_WINDOW_SIZE", "client", 4096, 4095
        ),
    )
    assert found[0].describe() == (
        "initial_window_size 4096 asked, 4095 in force (client SETTINGS_INITIAL_WINDOW_SIZE)"
    )


def test_gtlsclient_announces_its_windows_by_quic_names() -> None:
    options = GtlsOptions.create({"initial_window_size": 4096}, 1 << 20, None)
    exchange = SettingsExchange(options.settings_announced(), None)
    assert exchange.announced["initial_max_stream_data_bidi_local"] == 4096
    assert exchange.announced["initial_max_data"] == 1 << 20
    assert mismatches("h3", {"initial_window_size": 4096}, exchange) == ()


def test_every_study_setting_has_its_keys_where_the_protocol_carries_it() -> None:
    assert set(in_force_keys("h2c")) == {*SETTING_SPECS, "enable_connect_protocol"}
    carried = {name for name, counterpart in H3_COUNTERPARTS.items() if counterpart is not None}
    assert set(in_force_keys("h3")) == carried


VALUES = st.integers(0, 2**31 - 1)


@given(
    st.dictionaries(st.sampled_from(sorted(SETTING_SPECS)), st.tuples(VALUES, VALUES, VALUES)),
    st.sampled_from(PROTOCOLS),
    st.booleans(),
)
def test_a_mismatch_is_named_exactly_where_an_observed_value_differs_from_the_asked(
    cases: dict[str, tuple[int, int, int]], protocol: str, received_seen: bool
) -> None:
    """cases: setting -> (asked, the client's, the server's value in force)."""
    keys = in_force_keys(protocol)
    carried = {name: case for name, case in cases.items() if name in keys}
    announced = {keys[name][0]: client for name, (_, client, _) in carried.items()}
    received = {keys[name][1]: server for name, (_, _, server) in carried.items()}
    asked = {name: case[0] for name, case in cases.items()}
    exchange = SettingsExchange(announced, received if received_seen else None)
    expected = {
        (name, side, asked_value, value)
        for name, (asked_value, client, server) in carried.items()
        for side, value in (("client", client), ("server", server))
        if value != asked_value and (side == "client" or received_seen)
    }
    found = mismatches(protocol, asked, exchange)
    assert {(m.setting, m.side, m.asked, m.in_force) for m in found} == expected


def test_a_server_table_below_hpacks_default_is_in_force_from_the_clients_acknowledgement() -> None:
    """A client's first requests may use HPACK's 4,096-byte table before it has read the
    server's SETTINGS_HEADER_TABLE_SIZE 0: the server decodes them, and holds 0 once acked."""
    server = h2_connection(False, to_h2({"header_table_size": 0}))
    initiate_server(server)
    client = h2_connection(True, {})
    client.initiate_connection()
    request = [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/x")]
    client.send_headers(1, [*request, ("h2iot-trial-id", "t1")], end_stream=True)
    events = server.receive_data(client.data_to_send())
    assert any(isinstance(event, RequestReceived) for event in events)
    client.receive_data(server.data_to_send())  # the server's SETTINGS, acknowledged
    server.receive_data(client.data_to_send())
    assert server.decoder.max_allowed_table_size == 0
    assert settings_exchange(server, True).announced["SETTINGS_HEADER_TABLE_SIZE"] == 0
