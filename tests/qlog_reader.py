"""A qlog JSON-SEQ reader of the tests' own, independent of agent.qlog's writer: it knows only
RFC 7464 (records after 0x1E) and the qlog main schema's required fields."""

from __future__ import annotations

import json
from typing import Any


def read_json_seq(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An independent JSON-SEQ qlog reader: RS-separated JSON texts, the first the file's header
    with qlog_version, qlog_format and a trace's vantage_point, each next an event with a numeric
    time and a `category:event` name."""
    assert data.startswith(b"\x1e")
    records = [json.loads(text) for text in data.split(b"\x1e")[1:]]
    header, events = records[0], records[1:]
    assert header["qlog_format"] == "JSON-SEQ"
    assert isinstance(header["qlog_version"], str)
    assert header["trace"]["vantage_point"]["type"] in ("client", "server")
    for event in events:
        assert isinstance(event["time"], int | float)
        assert ":" in event["name"]
    return header, events
