"""A request as the server hands it to a workload's handler (agent.server.handler) and to the
stream's exchange (agent.server.exchange): its own module, so that neither imports the other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    method: bytes  # b"GET", b"HEAD", ...
    path: str  # `:path` as sent, query included
    headers: Mapping[bytes, bytes]  # every header field, pseudo-headers included
    # It arrived as 0-RTT early data (HTTP/3 before the handshake completed): replayable.
    early_data: bool = False
