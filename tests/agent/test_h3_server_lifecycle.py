"""An HTTP/3 server connection's lifecycle table (agent.server.h3_lifecycle), pair by pair: every
pair in the table moves to its state, every pair not in it is refused; random input sequences
follow the table exactly; and the line that says why a connection ended."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import ProtocolCode
from agent.server.h3_lifecycle import (
    ENDED,
    TRANSITIONS,
    H3Lifecycle,
    Input,
    State,
    ended_reason,
)
from tests.agent.lifecycle_checks import check_pair, reachable


@pytest.mark.parametrize(("state", "event"), list(itertools.product(State, Input)))
def test_every_pair_follows_the_table_or_is_refused(state: State, event: Input) -> None:
    check_pair(H3Lifecycle(), TRANSITIONS, state, event)


@given(st.lists(st.sampled_from(Input), max_size=30))
def test_input_sequences_follow_the_table(events: list[Input]) -> None:
    lifecycle = H3Lifecycle()
    for event in events:
        check_pair(lifecycle, TRANSITIONS, lifecycle.state, event)


def test_every_state_is_reachable_every_live_one_can_end_and_an_end_is_final() -> None:
    assert reachable(TRANSITIONS, State.HANDSHAKE) == set(State)
    for state in set(State) - ENDED:
        assert TRANSITIONS[(state, Input.DRAIN)] is State.DRAINED
        assert TRANSITIONS[(state, Input.TERMINATED)] is State.TERMINATED
    # Once ended, only the server's drain of everything it holds is taken, and changes nothing.
    for (source, event), target in TRANSITIONS.items():
        if source in ENDED:
            assert (event, target) == (Input.DRAIN, source)


def test_a_trial_after_the_first_leaves_the_connection_serving_and_says_so() -> None:
    lifecycle = H3Lifecycle()
    lifecycle.advance(Input.NEGOTIATED)
    assert lifecycle.advance(Input.TRIAL)  # the first: its counts started at the opening
    assert not lifecycle.advance(Input.TRIAL)  # a later one: its counts start now


def test_the_line_says_who_ended_the_connection_when_and_with_which_code() -> None:
    idle = (ProtocolCode("QUIC", 0, "NO_ERROR"), "Idle timeout")
    assert ended_reason(State.SERVING, idle) == (
        "closed with trials served: Idle timeout (QUIC NO_ERROR 0x0)"
    )
    cancelled = (ProtocolCode("HTTP/3", 0x10C, "H3_REQUEST_CANCELLED"), "")
    assert ended_reason(State.OPEN, cancelled) == (
        "closed before any trial: no reason given (HTTP/3 H3_REQUEST_CANCELLED 0x10c)"
    )
    assert ended_reason(State.HANDSHAKE, None) == (
        "we closed it in its handshake "
        "(shutdown, room for a new connection, or its handshake overdue)"
    )
