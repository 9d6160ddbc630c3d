"""The responses a client connection awaits (agent.client.response.Awaited), shared by the
HTTP/2 and HTTP/3 connections: filled, ended, failed one by one or all at once."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from agent.client.response import Awaited, Response
from agent.errors import PeerProtocolError


def test_a_response_is_taken_piece_by_piece_and_ends_once() -> None:
    async def run() -> None:
        awaited = Awaited()
        future = awaited.expect(1, Response.of_get("/a", keep_body=True))
        response = awaited.get(1)
        assert response is not None and awaited.get(3) is None
        response.take(b"ab")
        response.take(memoryview(b"cd"))
        assert awaited.end(1, 42) and not awaited.end(1, 43)
        done = await future
        assert (done.size_bytes, done.body, done.t_end_ns) == (4, b"abcd", 42)
        assert done.digest.hexdigest() == hashlib.sha256(b"abcd").hexdigest()

    asyncio.run(run())


def test_a_failure_reaches_its_stream_or_every_stream_still_awaited() -> None:
    async def run() -> None:
        awaited = Awaited()
        first, second, third = (
            awaited.expect(stream_id, Response.of_get("/", keep_body=False, hashed=False))
            for stream_id in (1, 3, 5)
        )
        awaited.fail(1, PeerProtocolError("server reset the stream for /"))
        awaited.end(3, 1)
        awaited.fail_all(PeerProtocolError("connection closed"))
        with pytest.raises(PeerProtocolError, match="reset"):
            await first
        assert (await second).size_bytes == 0
        with pytest.raises(PeerProtocolError, match="connection closed"):
            await third
        assert awaited.get(5) is None

    asyncio.run(run())
