"""When a subscription publishes and what it does with an item its subscriber cannot take yet,
pure.

Item k of a subscription is due at k / rate_hz after its start; a subscription of duration_s
publishes the items due before duration_s (at least one) and ends one period after the last,
so an on-time stream lasts duration_s. Under `drop` the publisher keeps the schedule and drops
an item while more than `buffer_bytes` wait for the subscriber (memory stays bounded by about
buffer_bytes plus one item); under `block` it waits for them to drain, then shifts its
timeline rather than bursting to catch up.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Literal

Backpressure = Literal["drop", "block"]


class Verdict(enum.Enum):
    SEND = "send"
    DROP = "drop"
    WAIT = "wait"  # drain below the bound first, then send


@dataclass(frozen=True)
class Schedule:
    rate_hz: float
    duration_s: float

    @property
    def items(self) -> int:
        # The tolerance keeps 0.3 s x 10 Hz at 3 items despite 0.3 * 10 = 3.0000000000000004.
        return max(1, math.ceil(self.duration_s * self.rate_hz - 1e-9))

    def due_s(self, seq: int) -> float:
        """When item `seq` is due after the start; `items` gives the end."""
        return seq / self.rate_hz


def verdict(policy: Backpressure, buffered_bytes: int, buffer_bytes: int) -> Verdict:
    if buffered_bytes <= buffer_bytes:
        return Verdict.SEND
    return Verdict.DROP if policy == "drop" else Verdict.WAIT
