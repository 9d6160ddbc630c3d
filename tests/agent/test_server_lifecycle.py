"""A server connection's lifecycle table, pair by pair: every pair in the table moves to its
state, every pair not in it is refused; random input sequences follow the table exactly; and
the line that says why a connection ended, in each state it can end in."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.exchange_queues import http2_code
from agent.server.lifecycle import ENDED, TRANSITIONS, Input, Lifecycle, State, ended_reason
from tests.agent.lifecycle_checks import check_pair, reachable


@pytest.mark.parametrize(("state", "event"), list(itertools.product(State, Input)))
def test_every_pair_follows_the_table_or_is_refused(state: State, event: Input) -> None:
    check_pair(Lifecycle(), TRANSITIONS, state, event)


@given(st.lists(st.sampled_from(Input), max_size=30))
def test_input_sequences_follow_the_table(events: list[Input]) -> None:
    lifecycle = Lifecycle()
    for event in events:
        check_pair(lifecycle, TRANSITIONS, lifecycle.state, event)


def test_the_table_has_one_start_one_end_and_every_state_can_end() -> None:
    assert reachable(TRANSITIONS, State.NEW) == set(State)
    assert not [pair for pair in TRANSITIONS if pair[0] is State.CLOSED]
    for state in set(State) - {State.NEW, State.CLOSED}:
        assert TRANSITIONS[(state, Input.LOST)] is State.CLOSED
    # Only the handshake is left by the peer's first bytes; drain is idempotent once ending.
    assert [pair for pair in TRANSITIONS if pair[1] is Input.PREFACE] == [
        (State.HANDSHAKE, Input.PREFACE)
    ]
    for state in ENDED - {State.CLOSED}:
        assert TRANSITIONS[(state, Input.DRAIN)] is state


@pytest.mark.parametrize(
    ("state", "exc", "line"),
    [
        (State.HANDSHAKE, None, "the peer closed the connection before its preface and first"),
        (State.OPEN, None, "the peer closed the connection while open"),
        (
            State.DRAINING,
            ConnectionResetError(104, "Connection reset by peer"),
            "connection lost while we drained it: ConnectionResetError: [Errno 104] Connection",
        ),
        (State.CLOSING, None, "drained: its streams finished after our GOAWAY (HTTP/2 NO_ERROR"),
        (State.GONE_AWAY, None, "the peer's GOAWAY (HTTP/2 NO_ERROR 0x0) ended it, and we closed"),
        (State.TIMED_OUT, None, "idle for the idle timeout: our GOAWAY (HTTP/2 NO_ERROR 0x0), and"),
        (
            State.FAILED,
            OSError("gone"),
            "a limit: our GOAWAY (HTTP/2 NO_ERROR 0x0), and we closed it (OSError: gone)",
        ),
    ],
)
def test_the_line_says_why_the_connection_ended(
    state: State, exc: BaseException | None, line: str
) -> None:
    assert line in ended_reason(state, exc, http2_code(0))


def test_every_state_a_connection_can_be_lost_in_has_a_line() -> None:
    lost_in = {source for (source, event) in TRANSITIONS if event is Input.LOST}
    for state in lost_in:
        assert ended_reason(state, None, None)
        assert "OSError: x" in ended_reason(state, OSError("x"), None)
