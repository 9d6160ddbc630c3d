"""Fan-out over nodes with per-node outcomes, like fabric's GroupResult.

fabric's ThreadingGroup runs one command on many hosts; deploy and check run a different,
multi-step procedure per node (local or SSH), so this runs any function per node on threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.errors import ControllerError
from controller.nodes.errors import NodeGroupError

Value = TypeVar("Value")
Result = TypeVar("Result")


@dataclass(frozen=True)
class GroupOutcome(Generic[Result]):
    """What each node returned (`succeeded`) or why it failed (`failed`), by name."""

    succeeded: Mapping[str, Result]
    failed: Mapping[str, ControllerError]

    def raise_on_failure(self) -> Mapping[str, Result]:
        """All results, or one NodeGroupError that keeps the partial results."""
        if self.failed:
            raise NodeGroupError(self.failed, self.succeeded)
        return self.succeeded


def fan_out(items: Mapping[str, Value], work: Callable[[Value], Result]) -> GroupOutcome[Result]:
    """Run work on every item concurrently. A ControllerError fails that item alone; anything
    else is a bug and propagates."""
    if not items:
        return GroupOutcome({}, {})
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        futures = {name: pool.submit(work, item) for name, item in items.items()}
    succeeded: dict[str, Result] = {}
    failed: dict[str, ControllerError] = {}
    for name, future in futures.items():
        try:
            succeeded[name] = future.result()
        except ControllerError as exc:
            failed[name] = exc
    return GroupOutcome(succeeded, failed)
