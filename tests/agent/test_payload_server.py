"""The payload server's pure parts: the verdict on one message (decode, digest, the figures
measured around the decode) and the decode figures' round trip through response headers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent.errors import PeerProtocolError
from agent.server.handler import Reply, Streamed
from agent.server.request import Request
from agent.workloads.payload.codecs import ENCODINGS
from agent.workloads.payload.dataset import digest, make_dataset
from agent.workloads.payload.errors import PayloadError
from agent.workloads.payload.protocol import DIGEST_HEADER, PATH, DecodeFigures
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
