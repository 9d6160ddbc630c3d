"""The payload server's pure parts: the verdict on one message (decode, digest, the figures
measured around the decode) and the decode figures' round trip through response headers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent.errors import PeerProtocolError
from agent.server.handler import Reply, Streamed
from agent.server.request import Request
from agent.workloads.payload.client import request_headers
from agent.workloads.payload.codecs import ENCODINGS
from agent.workloads.payload.dataset import digest, make_dataset
from agent.workloads.payload.errors import PayloadError
from agent.workloads.payload.protocol import (
    DIGEST_HEADER,
    PATH,
    RSS_PEAK_HEADER,
    SOAP_ACTION,
    SOAP_ACTION_HEADER,
    DecodeFigures,
)
from agent.workloads.payload.server import PayloadHandler, judge, rss_now_and_peak_bytes


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_a_good_message_is_200_with_its_figures(name: str) -> None:
    dataset = make_dataset("matrix", 64, 1)
    content_type, body = ENCODINGS[name].encode(dataset)
    verdict = judge(content_type, body, digest(dataset))
    assert (verdict.status, verdict.reason) == (200, "")
    assert verdict.figures.cpu_ns > 0
    rss, peak = rss_now_and_peak_bytes()
    assert 0 < rss <= peak
    assert verdict.figures.rss_peak_bytes > 0 and verdict.figures.rss_added_bytes >= 0


def test_a_wrong_digest_or_body_is_400_with_the_reason() -> None:
    dataset = make_dataset("structs", 20, 1)
    content_type, body = ENCODINGS["json"].encode(dataset)
    other = digest(make_dataset("structs", 20, 2))
    verdict = judge(content_type, body, other)
    assert verdict.status == 400 and f"the digest header says {other}" in verdict.reason
    verdict = judge(content_type, body[:-1], digest(dataset))
    assert verdict.status == 400 and verdict.reason.startswith("JSON:")


# One decode in a fresh interpreter: in the test process, memory freed by earlier tests can hold
# a parse without the RSS rising (how much depends on what ran before, and as which user).
_RSS_ADDED_BY_ONE_DECODE = """
import sys
from agent.workloads.payload.codecs import ENCODINGS
from agent.workloads.payload.dataset import digest, make_dataset
from agent.workloads.payload.server import judge
dataset = make_dataset("matrix", 256, 0)
content_type, body = ENCODINGS[sys.argv[1]].encode(dataset)
verdict = judge(content_type, body, digest(dataset))
assert verdict.status == 200, verdict.reason
print(verdict.figures.rss_added_bytes)
"""


def test_the_soap_parse_takes_more_memory_than_the_raw_one() -> None:
    """What the figures are for: XML text costs the parser memory the packed form does not."""
    added = {}
    for name in ("soap", "raw"):
        done = subprocess.run(
            [sys.executable, "-c", _RSS_ADDED_BY_ONE_DECODE, name],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        added[name] = int(done.stdout.split()[-1])
    assert added["soap"] > added["raw"]


def test_figures_round_trip_through_headers_and_bad_ones_are_named() -> None:
    figures = DecodeFigures(123, 456, 7)
    assert DecodeFigures.from_headers(dict(figures.headers())) == figures
    broken = dict(figures.headers())
    broken[b"h2iot-payload-decode-cpu-ns"] = b"-1"
    with pytest.raises(PeerProtocolError, match="h2iot-payload-decode-cpu-ns"):
        DecodeFigures.from_headers(broken)


def request(path: str = PATH, method: bytes = b"POST", **headers: bytes) -> Request:
    fields = {name.replace("_", "-").encode(): value for name, value in headers.items()}
    return Request(method, path, fields)


def test_the_handler_answers_before_the_body_what_needs_no_body() -> None:
    handler = PayloadHandler(1000)
    for refused, status in ((request("/other"), 404), (request(method=b"GET"), 405)):
        reply = handler.handle(refused)
        assert isinstance(reply, Reply) and reply.status == status
    unknown = handler.handle(request(content_type=b"text/html"))
    assert isinstance(unknown, Reply) and unknown.status == 415
    no_digest = handler.handle(request(content_type=b"application/cbor"))
    assert isinstance(no_digest, Reply) and no_digest.status == 400
    assert bytes(no_digest.body).decode().endswith("sha256 in hex\n")
    assert handler.refusals == {415: 1, 400: 1}
    fields = {b"content-type": b"application/cbor", DIGEST_HEADER: b"0" * 64}
    streamed = handler.handle(Request(b"POST", PATH, fields))
    assert isinstance(streamed, Streamed) and streamed.body_limit_bytes == 1000


def test_an_encoding_whose_library_is_missing_is_named_not_crashed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An SSH node gets the agent without extras: CBOR then fails with the extra's name, on
    the client before any trial and on the server as a 415, which keeps serving."""
    monkeypatch.setitem(sys.modules, "cbor2", None)  # import cbor2 raises ImportError
    monkeypatch.delitem(sys.modules, "agent.workloads.payload.codecs.cbor_codec", raising=False)
    with pytest.raises(PayloadError, match=r"encoding cbor needs the payload extra"):
        ENCODINGS["cbor"].encode(make_dataset("matrix", 2, 0))
    fields = {b"content-type": b"application/cbor", DIGEST_HEADER: b"0" * 64}
    reply = PayloadHandler(1000).handle(Request(b"POST", PATH, fields))
    assert isinstance(reply, Reply) and reply.status == 415
    assert b"pip install 'h2iot[payload]'" in bytes(reply.body)


def test_figures_of_more_digits_than_an_int64_are_refused_not_crashed() -> None:
    """int() refuses 5000 digits with a ValueError the client would not have caught."""
    broken = dict(DecodeFigures(1, 2, 3).headers())
    broken[RSS_PEAK_HEADER] = b"9" * 5000
    with pytest.raises(PeerProtocolError, match="h2iot-payload-rss-peak-bytes"):
        DecodeFigures.from_headers(broken)


SOAP_ENCODINGS = ["dime", "soap", "swa"]  # the envelope's three


def soap_request(name: str, soap_action: bytes | None) -> Request:
    fields = {b"content-type": ENCODINGS[name].media_type.encode(), DIGEST_HEADER: b"0" * 64}
    if soap_action is not None:
        fields[SOAP_ACTION_HEADER] = soap_action
    return Request(b"POST", PATH, fields)


def test_soap_is_spoken_by_the_three_envelope_encodings() -> None:
    assert sorted(name for name, encoding in ENCODINGS.items() if encoding.soap) == SOAP_ENCODINGS


@pytest.mark.parametrize("name", SOAP_ENCODINGS)
@pytest.mark.parametrize(
    ("soap_action", "reason"),
    [
        (None, "must carry SOAPAction"),
        (b"urn:h2iot:payload#send", "names no operation here"),  # unquoted
        (b'"urn:other#op"', "names no operation here"),
        (b"", "names no operation here"),  # no indication of the intent
    ],
)
def test_a_soap_request_without_our_soap_action_is_refused_before_its_body(
    name: str, soap_action: bytes | None, reason: str
) -> None:
    """SOAP 1.1 section 6.1.1: an HTTP client must send SOAPAction; a strict server refuses a
    request without it, as this one does."""
    handler = PayloadHandler(1000)
    reply = handler.handle(soap_request(name, soap_action))
    assert isinstance(reply, Reply) and reply.status == 400
    assert reason in bytes(reply.body).decode() and bytes(reply.body).count(b"\n") == 1
    assert handler.refusals == {400: 1}


@pytest.mark.parametrize("name", SOAP_ENCODINGS)
@pytest.mark.parametrize("soap_action", [SOAP_ACTION, b'""'])
def test_our_soap_action_or_the_request_uri_is_taken(name: str, soap_action: bytes) -> None:
    assert isinstance(PayloadHandler(1000).handle(soap_request(name, soap_action)), Streamed)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_the_client_sends_what_the_server_takes(name: str) -> None:
    """Our client's fields for each encoding (SOAPAction for the SOAP ones) are admitted."""
    dataset = make_dataset("matrix", 2, 0)
    fields = dict(request_headers(name, digest(dataset)))
    assert (fields.get(SOAP_ACTION_HEADER) == SOAP_ACTION) == (name in SOAP_ENCODINGS)
    fields[b"content-type"] = ENCODINGS[name].encode(dataset)[0].encode()
    handler = PayloadHandler(1000)
    assert isinstance(handler.handle(Request(b"POST", PATH, fields)), Streamed)
    assert handler.refusals.total() == 0


@pytest.mark.parametrize(
    ("value", "admitted"), [(b"0" * 63, False), (b"g" * 64, False), (b"AB" * 32, True)]
)
def test_the_digest_must_be_sha256_hex_in_either_case(value: bytes, admitted: bool) -> None:
    fields = {b"content-type": b"application/json", DIGEST_HEADER: value}
    answer = PayloadHandler(1000).handle(Request(b"POST", PATH, fields))
    assert isinstance(answer, Streamed) == admitted


def test_a_declared_length_over_the_limit_is_counted() -> None:
    """The connection answers it 413 before the handler's coroutine would run."""
    handler = PayloadHandler(1000)
    fields = {b"content-type": b"application/json", DIGEST_HEADER: b"0" * 64}
    for length, counted in ((b"1000", 0), (b"1001", 1)):
        streamed = handler.handle(Request(b"POST", PATH, {**fields, b"content-length": length}))
        assert isinstance(streamed, Streamed) and streamed.body_limit_bytes == 1000
        assert handler.refusals == ({413: 1} if counted else {})
