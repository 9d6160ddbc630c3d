"""The payload workload's server side: POST /payload with a dataset in one of the six encodings
(chosen by the request's Content-Type) and its digest in a header. The handler reads the whole
body (up to `body_limit_bytes`; over it the connection answers 413 before reading the rest),
decodes it into values, timing the decode alone (this thread's CPU, and the process's peak RSS
around it), checks the values against the digest and answers 200 with an empty body, the decode
figures in its headers (agent/workloads/payload/protocol.py).

Anything wrong is answered, counted and the server serves on: an unknown Content-Type 415, no
digest (64 hex digits) 400, a SOAP encoding's request without our SOAPAction 400 (all before the
body, which the connection then drops unread), a body that does not decode or whose values
differ from the digest 400, each with the reason in a one-line text body; a body over the limit
413 (the connection's, with no body; counted here, whether its content-length said so before
the body or the body grew past the limit).

Decoding runs on the event loop, as the reference's service decoded each message whole before
answering: other streams wait meanwhile, which a trial of sequential messages never has.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.errors import UsageError
from agent.probe import reset_inner_peak_rss
from agent.server.exchange import BodyTooLarge, ServerExchange
from agent.server.handler import NOT_FOUND, SERVER_HEADER, Handler, Reply, Streamed
from agent.server.request import Request
from agent.workloads.payload.codecs import BY_MEDIA_TYPE, media_type
from agent.workloads.payload.dataset import pack
from agent.workloads.payload.errors import DecodeError, PayloadError
from agent.workloads.payload.protocol import (
    DIGEST_HEADER,
    PATH,
    REFUSALS_HEADER,
    SOAP_ACTION_HEADER,
    DecodeFigures,
    soap_action_refusal,
)
from agent.workloads.payload.spec import PAYLOAD

log = logging.getLogger("h2iot.server.payload")

_STATUS = Path("/proc/self/status")
_TEXT = (b"content-type", b"text/plain; charset=utf-8")
_POST_ONLY = Reply(405, ((b"allow", b"POST"),))
_SHA256_HEX = re.compile("[0-9a-f]{64}")


def rss_now_and_peak_bytes() -> tuple[int, int]:
    """VmRSS and VmHWM of this process (/proc/self/status); zeros where there is no /proc."""
    rss = peak = 0
    try:
        lines = _STATUS.read_text().splitlines()
    except OSError:
        return rss, peak
    for line in lines:
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return rss, peak


@dataclass(frozen=True)
class Verdict:
    status: int
    reason: str  # why not 200, one line
    figures: DecodeFigures


def judge(content_type: str, body: bytes, digest: str) -> Verdict:
    """Decode the body (timed, with the peak RSS mark reset just before, the trial's peak so far
    held by agent.probe), then check the values against `digest`."""
    encoding = BY_MEDIA_TYPE[media_type(content_type)]
    decode = encoding.decode
    rss_before, _ = rss_now_and_peak_bytes()
    reset_inner_peak_rss()
    start_ns = time.thread_time_ns()
    try:
        dataset = decode(content_type, body)
        reason = ""
    except DecodeError as exc:
        reason = str(exc)
    cpu_ns = time.thread_time_ns() - start_ns
    _, peak = rss_now_and_peak_bytes()
    figures = DecodeFigures(cpu_ns, peak, max(0, peak - rss_before))
    if reason:
        return Verdict(400, reason, figures)
    got = hashlib.sha256(pack(dataset)).hexdigest()
    if got != digest:
        return Verdict(
            400, f"values decode to sha256 {got}, the digest header says {digest}", figures
        )
    return Verdict(200, "", figures)


class PayloadHandler:
    def __init__(self, body_limit_bytes: int) -> None:
        self.body_limit_bytes = body_limit_bytes
        self.refusals: Counter[int] = Counter()  # by status

    def handle(self, request: Request) -> Reply | Streamed:
        if request.path.split("?", 1)[0] != PATH:
            return NOT_FOUND
        if request.method != b"POST":
            return _POST_ONLY
        admitted = self._admit(request.headers)
        if isinstance(admitted, Reply):
            return admitted
        content_type, digest = admitted
        declared = _declared_length(request.headers)
        if declared > self.body_limit_bytes:
            # The connection answers this 413 and refuses the body before `serve` would run,
            # so here is the only place that sees it.
            self._count(413, f"content-length {declared} is over {self.body_limit_bytes} bytes")

        async def serve(exchange: ServerExchange) -> None:
            await self._serve(exchange, content_type, digest)

        return Streamed(serve, body_limit_bytes=self.body_limit_bytes)

    def _admit(self, headers: Mapping[bytes, bytes]) -> Reply | tuple[str, str]:
        """The request's Content-Type and digest, or the refusal of its header fields."""
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        encoding = BY_MEDIA_TYPE.get(media_type(content_type))
        if encoding is None:
            known = ", ".join(sorted(BY_MEDIA_TYPE))
            return self._refusal(415, f"Content-Type {content_type!r} is none of {known}")
        try:
            encoding.load()
        except PayloadError as exc:
            return self._refusal(415, str(exc))
        # Upper-case hex is the same digest; comparing it as sent would call the values wrong.
        digest = headers.get(DIGEST_HEADER, b"").decode("latin-1").lower()
        if _SHA256_HEX.fullmatch(digest) is None:
            return self._refusal(400, f"header {DIGEST_HEADER.decode()} must hold a sha256 in hex")
        if encoding.soap and (reason := soap_action_refusal(headers.get(SOAP_ACTION_HEADER))):
            return self._refusal(400, reason)
        return content_type, digest

    async def _serve(self, exchange: ServerExchange, content_type: str, digest: str) -> None:
        try:
            body = await exchange.read_body(self.body_limit_bytes)
        except BodyTooLarge as exc:  # the connection answered 413 and refused the rest
            self._count(413, str(exc))
            return
        verdict = judge(content_type, body, digest)
        del body  # the values and the body go before the answer is queued
        figures = verdict.figures.headers()
        if verdict.status == 200:
            headers = (*figures, SERVER_HEADER, self._refusals_header())
            exchange.send_headers(200, headers, end_stream=True)
            return
        reply = self._refusal(verdict.status, verdict.reason)
        exchange.send_headers(reply.status, (*figures, *reply.headers))
        exchange.send(reply.body, end_stream=True)

    def _count(self, status: int, reason: str) -> None:
        self.refusals[status] += 1
        log.info("payload: refused with %d: %s", status, reason)

    def _refusals_header(self) -> tuple[bytes, bytes]:
        return REFUSALS_HEADER, b"%d" % self.refusals.total()

    def _refusal(self, status: int, reason: str) -> Reply:
        self._count(status, reason)
        # A reason can quote the peer's bytes, line breaks of any kind included.
        line = " ".join(reason.splitlines())[:1000] + "\n"
        return Reply(
            status, (_TEXT, SERVER_HEADER, self._refusals_header()), memoryview(line.encode())
        )


def _declared_length(headers: Mapping[bytes, bytes]) -> int:
    """The content-length as the connection reads it; -1 without one (or one h2 refuses)."""
    value = headers.get(b"content-length")
    try:
        return int(value) if value is not None else -1
    except ValueError:
        return -1


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    if root is not None:
        raise UsageError("--root is for the page workload; payload serves no files")
    limit = params.get("body_limit_bytes", PAYLOAD.param("body_limit_bytes").default)
    assert isinstance(limit, int)
    return PayloadHandler(limit)
