"""A fresh h2 connection whose local SETTINGS are in force from the first frame, and a
server's start, whose lowered stream window is in force from the client's acknowledgement.

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


def initiate_server(connection: H2Connection) -> None:
    """`initiate_connection` for a server: its SETTINGS frame says every value it was made with,
    and a stream window below the protocol's 65,535 is in force once the client acknowledges
    it. Until then a client may send up to 65,535 on a stream (RFC 9113 6.9.3: it has not read
    our SETTINGS yet; an upload sent with its request does), as nghttpd takes it. A client's
    own window needs no such grace: no response comes before the server has read it."""
    connection.initiate_connection()
    settings = connection.local_settings
    window = settings.initial_window_size
    # h2 keeps each setting as a deque, the value in force first and values sent but not
    # yet acknowledged after it (h2.settings.Settings, 3.x to 4.4 at least).
    held = getattr(settings, "_settings", {}).get(SettingCodes.INITIAL_WINDOW_SIZE)
    if window < PROTOCOL_INITIAL_WINDOW and isinstance(held, deque) and list(held) == [window]:
        held.appendleft(PROTOCOL_INITIAL_WINDOW)
