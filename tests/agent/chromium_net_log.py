"""Chromium's net-log (the JSON file `chromium --log-net-log=FILE` writes) read for what a page
load did, per URL request and per QUIC connection; and the page workload's check against it.

Sans-IO: `parse_net_log(text, source)` takes the file's text; `read_net_log(path)` only reads
the file. The format (net-log format version 1): `{"constants": {...}, "events": [...]}`; each
event has a `type` and a `phase` (numbers, named by the constants' `logEventTypes` and
`logEventPhase`), a `source` (`id`, `type`, named by `logSourceType`) and optional `params`.
Net error codes and QUIC error codes are named by the constants' `netError` and `quicError`.

Per URL request (source type URL_REQUEST), from its events:
- URL and method: REQUEST_ALIVE's begin (`url`) and URL_REQUEST_START_JOB's begin (`method`);
- protocol: which transaction sent the request headers (HTTP_TRANSACTION_QUIC_SEND_REQUEST_HEADERS:
  h3, ..._HTTP2_...: h2, ..._SEND_REQUEST_HEADERS: http/1.1; none: no request went out);
  the QUIC connection it went over: HTTP_STREAM_REQUEST_BOUND_TO_QUIC_SESSION's dependency;
- status: the last HTTP_TRANSACTION_READ_RESPONSE_HEADERS' status line (Chromium writes an
  HTTP/3 response's `:status` as `HTTP/1.1 200`);
- body bytes: the sum of URL_REQUEST_JOB_FILTERED_BYTES_READ's `byte_count` (what the page got);
- net error: REQUEST_ALIVE's end `net_error` (a request never ended when the log has no end).

Per QUIC connection (source type QUIC_SESSION): host and port (its begin), whether its crypto
handshake completed, and how it closed (QUIC_SESSION_CLOSED: `quic_error`, `from_peer`,
`details`; QUIC_SESSION_CLOSE_ON_ERROR: the net error that made the browser close it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.site import SiteManifest

FORMAT_VERSION = 1
_SEND_HEADERS = {
    "HTTP_TRANSACTION_QUIC_SEND_REQUEST_HEADERS": "h3",
    "HTTP_TRANSACTION_HTTP2_SEND_REQUEST_HEADERS": "h2",
    "HTTP_TRANSACTION_SEND_REQUEST_HEADERS": "http/1.1",
}
NO_ERROR = "QUIC_NO_ERROR"
# How every headless load ends: once the page is dumped the browser closes its sessions itself,
# cancelling them with this error, its net error ERR_ABORTED.
BROWSER_EXIT = ("QUIC_CONNECTION_CANCELLED", "ERR_ABORTED")


class NetLogError(Exception):
    """The file is not a net-log this reader knows; the message names the file and the fault."""


@dataclass(frozen=True)
class Request:
    source_id: int
    url: str
    method: str | None
    protocol: str | None  # "h3", "h2", "http/1.1"; None: no request headers were sent
    quic_session: int | None  # the source id of the QUIC connection it went over
    status: int | None
    body_bytes: int
    finished: bool
    net_error: str | None  # e.g. "ERR_QUIC_PROTOCOL_ERROR"; None: no error


@dataclass(frozen=True)
class QuicSession:
    source_id: int
    host: str
    port: int
    handshake_completed: bool
    closed: bool
    quic_error: str | None  # QUIC_SESSION_CLOSED's error, e.g. "QUIC_NETWORK_IDLE_TIMEOUT"
    from_peer: bool
    details: str
    net_error: str | None  # why the browser closed it (QUIC_SESSION_CLOSE_ON_ERROR)

    def connection_error(self) -> str | None:
        """Why the connection failed, in one line; None for a clean one: its handshake
        completed and it closed without error, or by the browser's own exit (`BROWSER_EXIT`),
        or not yet."""
        closed_with = f"closed with {self.quic_error} ({self.details})"
        if not self.handshake_completed:
            return f"its handshake never completed; {closed_with if self.closed else 'open'}"
        if not self.closed or self.quic_error == NO_ERROR:
            return None
        if not self.from_peer and (self.quic_error, self.net_error) == BROWSER_EXIT:
            return None
        return f"{closed_with} by {'the server' if self.from_peer else 'the browser'}"


@dataclass(frozen=True)
class NetLog:
    requests: tuple[Request, ...]
    quic_sessions: tuple[QuicSession, ...]


class _Names:
    """The constants' tables, number -> name."""

    def __init__(self, constants: Mapping[str, Any], fail: Callable[[str], NetLogError]) -> None:
        tables: dict[str, dict[int, str]] = {}
        for key in ("logEventTypes", "logEventPhase", "logSourceType", "netError", "quicError"):
            table = constants.get(key)
            if not isinstance(table, dict):
                raise fail(f"constants has no '{key}' table")
            tables[key] = {number: name for name, number in table.items()}
        self.event = tables["logEventTypes"]
        self.phase = tables["logEventPhase"]
        self.source = tables["logSourceType"]
        self.net_error = tables["netError"]
        self.quic_error = tables["quicError"]

    def error(self, table: dict[int, str], code: object) -> str | None:
        if not isinstance(code, int) or code == 0:
            return None
        return table.get(code, str(code))


@dataclass(frozen=True)
class _Event:
    name: str
    phase: str
    params: Mapping[str, Any]


def parse_net_log(text: str, source: str = "net-log") -> NetLog:
    """The requests and QUIC connections of the net-log in `text`; a NetLogError naming
    `source` and what is wrong otherwise."""

    def fail(message: str) -> NetLogError:
        return NetLogError(f"{source}: {message}")

    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        # A browser killed before it exits leaves the events array open.
        raise fail(f"not valid JSON ({where}: {error.msg}); cut short?") from None
    if not isinstance(document, dict) or not isinstance(document.get("constants"), dict):
        raise fail("not a net-log: no 'constants' object")
    constants = document["constants"]
    version = constants.get("logFormatVersion")
    if version != FORMAT_VERSION:
        raise fail(f"logFormatVersion is {version!r}, this reader knows {FORMAT_VERSION}")
    names = _Names(constants, fail)
    events = document.get("events")
    if not isinstance(events, list):
        raise fail("no 'events' array")
    by_source: dict[tuple[str, int], list[_Event]] = defaultdict(list)
    for number, event in enumerate(events):
        try:
            kind = names.source.get(event["source"]["type"], "")
            key = (kind, int(event["source"]["id"]))
            params = event.get("params", {})
            by_source[key].append(
                _Event(
                    names.event.get(event["type"], ""),
                    names.phase.get(event["phase"], ""),
                    params if isinstance(params, dict) else {},
                )
            )
        except (KeyError, TypeError, ValueError):
            raise fail(f"events[{number}] lacks a numeric type, phase or source") from None
    requests = tuple(
        _request(source_id, found, names)
        for (kind, source_id), found in by_source.items()
        if kind == "URL_REQUEST"
    )
    sessions = tuple(
        _session(source_id, found, names)
        for (kind, source_id), found in by_source.items()
        if kind == "QUIC_SESSION"
    )
    return NetLog(tuple(r for r in requests if r is not None), sessions)


def read_net_log(path: Path) -> NetLog:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise NetLogError(f"{path}: cannot read the net-log: {error.strerror}") from None
    # Bytes that are not UTF-8 can only be inside a string (a header's value): kept, replaced.
    return parse_net_log(data.decode("utf-8", errors="replace"), str(path))


def _request(source_id: int, events: list[_Event], names: _Names) -> Request | None:
    """The request of one URL_REQUEST source; None when the log lacks its start."""
    url = method = protocol = None
    quic_session = status = None
    body_bytes = 0
    finished = False
    net_error: str | None = None
    for event in events:
        if event.name == "REQUEST_ALIVE" and event.phase == "PHASE_BEGIN":
            url = event.params.get("url")
        elif event.name == "REQUEST_ALIVE" and event.phase == "PHASE_END":
            finished = True
            net_error = names.error(names.net_error, event.params.get("net_error"))
        elif event.name == "URL_REQUEST_START_JOB" and event.phase == "PHASE_BEGIN":
            method = event.params.get("method")
        elif event.name in _SEND_HEADERS:
            protocol = _SEND_HEADERS[event.name]
        elif event.name == "HTTP_STREAM_REQUEST_BOUND_TO_QUIC_SESSION":
            quic_session = event.params.get("source_dependency", {}).get("id")
        elif event.name == "HTTP_TRANSACTION_READ_RESPONSE_HEADERS":
            status = _status(event.params.get("headers"))
        elif event.name == "URL_REQUEST_JOB_FILTERED_BYTES_READ":
            body_bytes += int(event.params.get("byte_count", 0))
    if not isinstance(url, str):
        return None
    return Request(
        source_id, url, method, protocol, quic_session, status, body_bytes, finished, net_error
    )


def _status(headers: object) -> int | None:
    """The status of a status line such as `HTTP/1.1 200` (the headers' first line)."""
    if not isinstance(headers, list) or not headers or not isinstance(headers[0], str):
        return None
    words = headers[0].split()
    return int(words[1]) if len(words) > 1 and words[1].isdigit() else None


def _session(source_id: int, events: list[_Event], names: _Names) -> QuicSession:
    host, port = "", 0
    completed = closed = from_peer = False
    quic_error = net_error = None
    details = ""
    for event in events:
        if event.name == "QUIC_SESSION" and event.phase == "PHASE_BEGIN":
            host, port = str(event.params.get("host", "")), int(event.params.get("port", 0))
        elif event.name == "QUIC_SESSION_CRYPTO_HANDSHAKE_COMPLETE":
            completed = True
        elif event.name == "QUIC_SESSION_CLOSE_ON_ERROR":
            net_error = names.error(names.net_error, event.params.get("net_error"))
        elif event.name == "QUIC_SESSION_CLOSED" and not closed:
            closed = True
            code = event.params.get("quic_error")
            quic_error = NO_ERROR if code == 0 else names.error(names.quic_error, code)
            from_peer = bool(event.params.get("from_peer"))
            details = str(event.params.get("details", ""))
    return QuicSession(
        source_id, host, port, completed, closed, quic_error, from_peer, details, net_error
    )


def page_problems(log: NetLog, manifest: SiteManifest, origin: str) -> list[str]:
    """What keeps the page at `origin` (`host:port`) from having loaded over HTTP/3, one line
    each (none: it did): a file of the manifest never requested, or a request for it not
    over h3, not answered 200, with a body other than the manifest's size, or failed; a QUIC
    connection to the origin that failed (`QuicSession.connection_error`). Requests on the
    origin for files outside the manifest are the browser's own (its favicon.ico), and
    requests elsewhere (its background services) are no part of the page."""
    problems: list[str] = []
    base = f"https://{origin}/"
    wanted = {
        base + ("" if file.path == manifest.index else file.path): file for file in manifest.files
    }
    fetched: dict[str, list[Request]] = defaultdict(list)
    for request in log.requests:
        if request.url in wanted:
            fetched[request.url].append(request)
    for url, file in wanted.items():
        if not fetched[url]:
            problems.append(f"{file.path}: never requested")
        for request in fetched[url]:
            problems.extend(f"{file.path}: {fault}" for fault in _faults(request, file.size_bytes))
    host, _, port = origin.rpartition(":")
    for session in log.quic_sessions:
        error = (
            session.connection_error()
            if (session.host, str(session.port)) == (host, port)
            else None
        )
        if error is not None:
            problems.append(f"QUIC connection {session.source_id} to {origin}: {error}")
    return problems


def _faults(request: Request, size_bytes: int) -> Iterable[str]:
    if request.net_error is not None or not request.finished:
        yield f"failed with {request.net_error}" if request.finished else "never finished"
        return
    if request.protocol != "h3":
        yield f"over {request.protocol or 'no protocol (no request sent)'}, not h3"
    if request.status != 200:
        yield f"status {request.status}, not 200"
    if request.body_bytes != size_bytes:
        yield f"{request.body_bytes} body bytes, the manifest's size is {size_bytes}"
