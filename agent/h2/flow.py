"""When a receiver sends WINDOW_UPDATE: a sans-IO policy for one flow-control window.

The receiver tracks the *allowance*: how many more DATA bytes the peer may send before it must
wait. DATA lowers it; an update raises it back to the target window. The policy only decides
*when* to update; the increment always restores the allowance to exactly the target, so the peer
never holds more credit than the window (which the study's effect depends on).

Policies:
- ``half`` (default, as nghttp2): update once the allowance has fallen by half the window or more.
- ``every-frame``: update after every DATA frame (the most WINDOW_UPDATE frames).
- ``exhausted``: update only when the allowance reaches zero (fewest frames, most stalls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

WindowUpdatePolicyName = Literal["half", "every-frame", "exhausted"]
WINDOW_UPDATE_POLICIES: tuple[WindowUpdatePolicyName, ...] = ("half", "every-frame", "exhausted")
DEFAULT_WINDOW_UPDATE_POLICY: WindowUpdatePolicyName = "half"

MAX_WINDOW = 2**31 - 1


class ReceiveWindow:
    """One window (a stream's or the connection's), as the receiving side manages it."""

    __slots__ = ("_threshold", "allowance", "target")

    def __init__(self, target: int, initial_allowance: int, policy: WindowUpdatePolicyName) -> None:
        # `target` was range-checked where it entered (the command line): not again here.
        self.target = target
        # The peer's credit starts where the protocol puts it (65535 for the connection, the
        # SETTINGS value for streams); a smaller target is then reached by withholding updates.
        self.allowance = initial_allowance
        if policy == "half":
            self._threshold = max(1, target // 2)
        elif policy == "every-frame":
            self._threshold = 1
        else:
            self._threshold = max(1, target)

    def opening_increment(self) -> int:
        """An increment to send before any DATA, when the target exceeds the initial credit."""
        if self.target > self.allowance:
            increment = self.target - self.allowance
            self.allowance = self.target
            return increment
        return 0

    def consume(self, size: int) -> int:
        """Account for `size` flow-controlled bytes; return the WINDOW_UPDATE increment, or 0."""
        self.allowance -= size
        deficit = self.target - self.allowance
        if deficit >= self._threshold or (self.allowance <= 0 < deficit):
            self.allowance = self.target
            return deficit
        return 0


@dataclass(frozen=True)
class FlowControlOptions:
    """The receive-side flow-control choices a client makes beyond its SETTINGS; recorded with
    every trial. The stream window is not here: it is SETTINGS_INITIAL_WINDOW_SIZE, one entry of
    the settings the client announces, and is read from there."""

    connection_window: int = 65535
    window_update_policy: WindowUpdatePolicyName = DEFAULT_WINDOW_UPDATE_POLICY

    def record(self, initial_window_size: int) -> dict[str, object]:
        """The record's `flow_control` object: the announced stream window beside these."""
        return {
            "initial_window_size": initial_window_size,
            "connection_window": self.connection_window,
            "window_update_policy": self.window_update_policy,
        }
