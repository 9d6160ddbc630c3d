"""The check every lifecycle table's tests make (agent.transitions): one input in one state."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import pytest

from agent.errors import LifecycleError
from agent.transitions import TableLifecycle


def check_pair(
    lifecycle: TableLifecycle[Any, Any],
    table: Mapping[tuple[Any, Any], enum.Enum],
    state: enum.Enum,
    event: enum.Enum,
) -> None:
    """In `state`, `event` moves to the table's state, or is refused naming both and changes
    nothing."""
    lifecycle.state = state
    following = table.get((state, event))
    if following is None:
        with pytest.raises(LifecycleError) as refused:
            lifecycle.advance(event)
        assert (refused.value.state, refused.value.event) == (state.value, event.value)
        assert lifecycle.state is state
    else:
        assert lifecycle.advance(event) is (following is not state)
        assert lifecycle.state is following


def reachable(table: Mapping[tuple[Any, Any], enum.Enum], start: enum.Enum) -> set[enum.Enum]:
    """Every state the table can move to from `start`, `start` included."""
    found = {start}
    frontier = [start]
    while frontier:
        state = frontier.pop()
        for (source, _event), target in table.items():
            if source is state and target not in found:
                found.add(target)
                frontier.append(target)
    return found
