"""The net-log reader (tests.agent.chromium_net_log) on two real Chromium 156 captures, trimmed:
the events of URL requests and QUIC connections that the reader reads, and of the constants
their tables and the events' names (chromium_net_log/).

- page-h3-w4096.json: test_h3_empty_cid's Chromium test against our h3 server at W = 4096 on
  the tests' site (its manifest: page-manifest.json), origin localhost:36243;
- silent-server.json: the same browser against a UDP port that reads and never answers, origin
  localhost:42993 (the issue 39 failure's shape: idle timeout, ERR_QUIC_PROTOCOL_ERROR).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.site import SiteManifest, parse_manifest
from tests.agent.chromium_net_log import (
    NetLogError,
    page_problems,
    parse_net_log,
    read_net_log,
)

HERE = Path(__file__).parent / "chromium_net_log"
PAGE = HERE / "page-h3-w4096.json"
SILENT = HERE / "silent-server.json"
PAGE_ORIGIN = "localhost:36243"
MANIFEST = parse_manifest((HERE / "page-manifest.json").read_text())


def _document(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def test_every_resource_of_the_page_came_over_h3_with_status_200_and_its_size() -> None:
    log = read_net_log(PAGE)
    base = f"https://{PAGE_ORIGIN}/"
    ours = {r.url.removeprefix(base): r for r in log.requests if r.url.startswith(base)}
    for file in MANIFEST.files:
        request = ours["" if file.path == MANIFEST.index else file.path]
        assert (request.method, request.protocol, request.status) == ("GET", "h3", 200)
        assert request.body_bytes == file.size_bytes
        assert request.finished and request.net_error is None
    (session,) = log.quic_sessions
    assert {r.quic_session for r in ours.values()} == {session.source_id}  # favicon.ico too
    assert (session.host, session.port, session.handshake_completed) == ("localhost", 36243, True)
    # The browser closing its connection as it exits is no connection error.
    assert (session.quic_error, session.net_error, session.from_peer) == (
        "QUIC_CONNECTION_CANCELLED",
        "ERR_ABORTED",
        False,
    )
    assert session.connection_error() is None
    assert page_problems(log, MANIFEST, PAGE_ORIGIN) == []


def test_the_browsers_own_requests_are_no_part_of_the_page() -> None:
    log = read_net_log(PAGE)
    favicon = next(r for r in log.requests if r.url.endswith("/favicon.ico"))
    assert (favicon.protocol, favicon.status) == ("h3", 404)
    elsewhere = [r for r in log.requests if PAGE_ORIGIN not in r.url]
    assert elsewhere and {r.net_error for r in elsewhere} == {"ERR_NAME_NOT_RESOLVED"}
    assert page_problems(log, MANIFEST, PAGE_ORIGIN) == []


def test_a_server_that_never_answers_fails_every_condition_it_can() -> None:
    log = read_net_log(SILENT)
    problems = page_problems(log, MANIFEST, "localhost:42993")
    assert problems[0] == "index.html: failed with ERR_QUIC_PROTOCOL_ERROR"
    assert problems[1:-1] == [
        f"{file.path}: never requested" for file in MANIFEST.files if file.path != "index.html"
    ]
    assert problems[-1].startswith(
        "QUIC connection 130 to localhost:42993: its handshake never completed; closed with "
        "QUIC_NETWORK_IDLE_TIMEOUT (No recent network activity after"
    )


def _source_of(document: dict[str, Any], path: str) -> int:
    """The URL_REQUEST source id that fetched `path` of the page."""
    url = f"https://{PAGE_ORIGIN}/" + ("" if path == MANIFEST.index else path)
    alive = document["constants"]["logEventTypes"]["REQUEST_ALIVE"]
    return next(
        e["source"]["id"]
        for e in document["events"]
        if e["type"] == alive and e.get("params", {}).get("url") == url
    )


def _events(document: dict[str, Any], source_id: int, name: str) -> list[dict[str, Any]]:
    number = document["constants"]["logEventTypes"][name]
    return [e for e in document["events"] if e["source"]["id"] == source_id and e["type"] == number]


def _over_h2(document: dict[str, Any], source_id: int) -> None:
    types = document["constants"]["logEventTypes"]
    for event in _events(document, source_id, "HTTP_TRANSACTION_QUIC_SEND_REQUEST_HEADERS"):
        event["type"] = types["HTTP_TRANSACTION_HTTP2_SEND_REQUEST_HEADERS"]


def _status_404(document: dict[str, Any], source_id: int) -> None:
    for event in _events(document, source_id, "HTTP_TRANSACTION_READ_RESPONSE_HEADERS"):
        event["params"]["headers"][0] = "HTTP/1.1 404"


def _one_byte_short(document: dict[str, Any], source_id: int) -> None:
    _events(document, source_id, "URL_REQUEST_JOB_FILTERED_BYTES_READ")[-1]["params"][
        "byte_count"
    ] -= 1


def _reset(document: dict[str, Any], source_id: int) -> None:
    for event in _events(document, source_id, "REQUEST_ALIVE"):
        if event["phase"] == document["constants"]["logEventPhase"]["PHASE_END"]:
            event["params"] = {
                "net_error": document["constants"]["netError"]["ERR_QUIC_PROTOCOL_ERROR"]
            }


def _unfinished(document: dict[str, Any], source_id: int) -> None:
    end = document["constants"]["logEventPhase"]["PHASE_END"]
    for event in _events(document, source_id, "REQUEST_ALIVE"):
        if event["phase"] == end:
            document["events"].remove(event)


def _never_requested(document: dict[str, Any], source_id: int) -> None:
    document["events"] = [e for e in document["events"] if e["source"]["id"] != source_id]


BREAKS: dict[str, tuple[Callable[[dict[str, Any], int], None], str]] = {
    "over h2": (_over_h2, "over h2, not h3"),
    "404": (_status_404, "status 404, not 200"),
    "short": (_one_byte_short, "body bytes, the manifest's size is"),
    "reset": (_reset, "failed with ERR_QUIC_PROTOCOL_ERROR"),
    "unfinished": (_unfinished, "never finished"),
    "missing": (_never_requested, "never requested"),
}


@given(
    path=st.sampled_from([file.path for file in MANIFEST.files]),
    broken=st.sampled_from(sorted(BREAKS)),
)
def test_each_broken_condition_of_each_resource_is_named(path: str, broken: str) -> None:
    document = _document(PAGE)
    change, expected = BREAKS[broken]
    change(document, _source_of(document, path))
    problems = page_problems(parse_net_log(json.dumps(document)), MANIFEST, PAGE_ORIGIN)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}: ") and expected in problems[0]


def _closed(document: dict[str, Any], *, from_peer: bool, quic_error: str) -> None:
    closed = document["constants"]["logEventTypes"]["QUIC_SESSION_CLOSED"]
    for event in document["events"]:
        if event["type"] == closed:
            code = document["constants"]["quicError"][quic_error]
            event["params"].update(from_peer=from_peer, quic_error=code, details="test")


@pytest.mark.parametrize(
    ("from_peer", "quic_error", "expected"),
    [
        (True, "QUIC_NO_ERROR", None),
        (False, "QUIC_NO_ERROR", None),
        (True, "IETF_QUIC_PROTOCOL_VIOLATION", "by the server"),
        (False, "QUIC_NETWORK_IDLE_TIMEOUT", "by the browser"),
        # Cancelled, but by the server: not the browser's exit.
        (True, "QUIC_CONNECTION_CANCELLED", "by the server"),
    ],
)
def test_a_connection_closed_with_an_error_is_a_problem(
    from_peer: bool, quic_error: str, expected: str | None
) -> None:
    document = _document(PAGE)
    _closed(document, from_peer=from_peer, quic_error=quic_error)
    problems = page_problems(parse_net_log(json.dumps(document)), MANIFEST, PAGE_ORIGIN)
    if expected is None:
        assert problems == []
    else:
        assert problems == [
            f"QUIC connection 130 to {PAGE_ORIGIN}: closed with {quic_error} (test) {expected}"
        ]


def test_another_origins_connection_is_not_the_pages() -> None:
    log = read_net_log(SILENT)
    assert page_problems(log, _only_index(), "localhost:1")[-1] == "index.html: never requested"


def _only_index() -> SiteManifest:
    index = next(file for file in MANIFEST.files if file.path == MANIFEST.index)
    return SiteManifest(MANIFEST.index, (index,), MANIFEST.seed, index.size_bytes)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        (PAGE.read_text()[:5000], "not valid JSON (line"),
        ("[]", "not a net-log: no 'constants' object"),
        ('{"constants": {"logFormatVersion": 2}}', "logFormatVersion is 2, this reader knows 1"),
        ('{"constants": {"logFormatVersion": 1}}', "constants has no 'logEventTypes' table"),
    ],
    ids=["cut-short", "not-an-object", "newer", "no-tables"],
)
def test_a_file_that_is_not_a_net_log_is_refused_naming_it(text: str, fault: str) -> None:
    with pytest.raises(NetLogError) as raised:
        parse_net_log(text, "x/net-log.json")
    assert str(raised.value).startswith(f"x/net-log.json: {fault}")


def test_an_event_without_a_source_is_refused_naming_it() -> None:
    document = _document(PAGE)
    del document["events"][3]["source"]
    with pytest.raises(NetLogError, match=r"^n: events\[3\] lacks a numeric type, phase or source"):
        parse_net_log(json.dumps(document), "n")


def test_an_unreadable_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(NetLogError, match="cannot read the net-log"):
        read_net_log(tmp_path / "absent.json")
