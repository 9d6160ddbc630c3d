"""A lifecycle as one table: a state, and the inputs each state takes (h2's state pattern,
smaller). The server connection's (agent.server.lifecycle) and the client connection's
(agent.client.lifecycle) are such tables over their own states and inputs."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar

from agent.errors import LifecycleError

S = TypeVar("S", bound=enum.Enum)
I = TypeVar("I", bound=enum.Enum)  # noqa: E741  (the table's other axis, beside S)


class TableLifecycle(Generic[S, I]):
    """Takes inputs by `table`; any pair not in it is a bug of the caller (LifecycleError)."""

    __slots__ = ("_table", "state")

    def __init__(self, table: Mapping[tuple[S, I], S], start: S) -> None:
        self._table = table
        self.state = start

    def advance(self, event: I) -> bool:
        """Take `event`; True when the state changed (the caller's side effects run then)."""
        try:
            following = self._table[(self.state, event)]
        except KeyError:
            raise LifecycleError(str(self.state.value), str(event.value)) from None
        changed = following is not self.state
        self.state = following
        return changed
