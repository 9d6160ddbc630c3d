"""A fresh h2 connection whose local SETTINGS are in force from the first frame.

h2 treats values passed as `initial_values` as already acknowledged, which is what the first
SETTINGS frame needs, but it derives some limits once, in its constructor (the largest frame it
accepts, the HPACK decoder's header-list and table limits). Replacing `local_settings` afterwards
leaves those stale, so they are re-derived here.
"""

from __future__ import annotations

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
