"""A server exchange's two states (agent.server.exchange): its response and who takes its
request body, each table pair by pair, and the exchange moving through them as its handler
and its connection tell it what happened."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from agent.errors import ExchangeStateError
from agent.server.exchange import (
    BODY_TRANSITIONS,
    RESPONSE_TRANSITIONS,
    Body,
    BodyInput,
    BodyTooLarge,
    Response,
    ResponseInput,
    ServerExchange,
)
from agent.server.request import Request
from agent.transitions import TableLifecycle
from tests.agent.lifecycle_checks import check_pair


@pytest.mark.parametrize(("state", "event"), list(itertools.product(Body, BodyInput)))
def test_every_pair_follows_the_table_or_is_refused(state: Body, event: BodyInput) -> None:
    check_pair(TableLifecycle(BODY_TRANSITIONS, Body.READING), BODY_TRANSITIONS, state, event)


@pytest.mark.parametrize(("state", "event"), list(itertools.product(Response, ResponseInput)))
def test_every_response_pair_follows_the_table_or_is_refused(
    state: Response, event: ResponseInput
) -> None:
    start = TableLifecycle(RESPONSE_TRANSITIONS, Response.UNSTARTED)
    check_pair(start, RESPONSE_TRANSITIONS, state, event)


class _Link:
    """The connection side, doing nothing: these tests drive the exchange directly."""

    def exchange_headers(self, *_args: object) -> None: ...
    def exchange_queued(self, *_args: object) -> None: ...
    def exchange_consumed(self, *_args: object) -> None: ...
    def exchange_reset(self, *_args: object) -> None: ...
    def exchange_refuse_body(self, *_args: object) -> None: ...


def _exchange() -> ServerExchange:
    request = Request(b"POST", "/upload", {})
    return ServerExchange(_Link(), request, 1, body_limit_bytes=4)


def test_a_body_refused_before_the_response_is_answered_and_the_handler_told() -> None:
    exchange = _exchange()
    assert exchange.deliver(b"1234", 4) and not exchange.deliver(b"5", 1)
    assert exchange.refused(4) == 4  # what the handler held unread, its credit to return
    assert exchange.body is Body.REFUSED
    assert exchange.headers_sent and exchange.end_queued  # the 413 is the response
    with pytest.raises(BodyTooLarge):
        asyncio.run(exchange.receive())
    exchange.handler_finished()
    assert exchange.body is Body.REFUSED and exchange.handler_done


def test_a_body_over_its_limit_after_the_response_began_is_cancelled() -> None:
    exchange = _exchange()
    exchange.send_headers(200)
    exchange.refused(4)
    assert exchange.body is Body.DROPPED
    exchange.handler_finished()
    assert exchange.body is Body.DROPPED


def test_once_the_handler_is_done_the_body_is_nobodys() -> None:
    exchange = _exchange()
    exchange.handler_finished()
    assert exchange.body is Body.DROPPED


def test_a_response_starts_ends_once_and_is_written() -> None:
    exchange = _exchange()
    with pytest.raises(ExchangeStateError):
        exchange.send(b"x")  # before its headers
    exchange.send_headers(200)
    assert exchange.response is Response.STARTED and exchange.headers_sent
    exchange.send(b"body", end_stream=True)
    assert exchange.response is Response.ENDING and exchange.end_queued
    with pytest.raises(ExchangeStateError):
        exchange.send_trailers([(b"x", b"1")])  # after its end
    exchange.written()
    assert exchange.response is Response.WRITTEN and exchange.response_done


def test_trailers_end_a_response() -> None:
    exchange = _exchange()
    exchange.send_headers(200)
    exchange.send_trailers([(b"grpc-status", b"0")])
    assert exchange.response is Response.ENDING and exchange.trailers == [(b"grpc-status", b"0")]
