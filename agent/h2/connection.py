"""A fresh h2 connection whose local SETTINGS are in force from the first frame, and a
server's start, whose limits a client could break unknowingly (a lowered stream window, a
stream limit) are in force from the client's acknowledgement.

h2 treats values passed as `initial_values` as already acknowledged, which is what the first
SETTINGS frame needs, but it derives some limits once, in its constructor (the largest frame it
accepts, the HPACK decoder's header-list and table limits). Replacing `local_settings` afterwards
leaves those stale, so they are re-derived here.
"""

from __future__ import annotations

from collections import deque

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.settings import SettingCodes, Settings


def h2_connection(client_side: bool, settings: dict[SettingCodes, int]) -> H2Connection:
    connection = H2Connection(
        H2Configuration(
            client_side=client_side, header_encoding=None, validate_inbound_headers=True
        )
    )
    local = Settings(client=client_side, initial_values=settings)
    connection.local_settings = local
    connection.max_inbound_frame_size = local.max_frame_size
    if local.max_header_list_size is not None:
        connection.decoder.max_header_list_size = local.max_header_list_size
    connection.decoder.max_allowed_table_size = local.header_table_size
    return connection


PROTOCOL_INITIAL_WINDOW = 65535
PROTOCOL_HEADER_TABLE = 4096  # RFC 9113 6.5.2: HPACK's dynamic table before SETTINGS say
# h2's own value for "no limit" where MAX_CONCURRENT_STREAMS was never set.
UNLIMITED_STREAMS = 2**32 + 1


def initiate_server(connection: H2Connection) -> None:
    """`initiate_connection` for a server: its SETTINGS frame says every value it was made with,
    and the limits a client could break before it has read them are in force once it
    acknowledges them (RFC 9113 6.5.3, 6.9.3): a stream window below the protocol's 65,535 (a
    client may send up to 65,535 on a stream before, as an upload sent with its request does),
    a header table below HPACK's 4,096 (a client's first requests may fill the default table:
    h2 would end the connection on their header blocks, PROTOCOL_ERROR) and
    MAX_CONCURRENT_STREAMS (the protocol's initial value is no limit: requests sent at once
    with the preface may outnumber ours). nghttpd takes the window and the limit so. Until
    then h2 would end the connection (FLOW_CONTROL_ERROR; PROTOCOL_ERROR, before decoding the
    headers of the stream too many). A client's own settings need no such grace: no response
    comes before the server has read them."""
    connection.initiate_connection()
    settings = connection.local_settings
    graces = (
        (SettingCodes.INITIAL_WINDOW_SIZE, PROTOCOL_INITIAL_WINDOW),
        (SettingCodes.HEADER_TABLE_SIZE, PROTOCOL_HEADER_TABLE),
        (SettingCodes.MAX_CONCURRENT_STREAMS, UNLIMITED_STREAMS),
    )
    # h2 keeps each setting as a deque, the value in force first and values sent but not
    # yet acknowledged after it (h2.settings.Settings, 3.x to 4.4 at least).
    held_by_code = getattr(settings, "_settings", {})
    for code, protocol_value in graces:
        held = held_by_code.get(code)
        if isinstance(held, deque) and len(held) == 1 and held[0] < protocol_value:
            held.appendleft(protocol_value)
    # The decoder's limit, derived once from the value announced, is the protocol's until the
    # acknowledgement, when h2 sets it to the announced one.
    connection.decoder.max_allowed_table_size = settings.header_table_size
