"""Limits that protect the server from abusive peers, sans-IO (time is passed in).

h2 itself refuses malformed frames, flow-control violations, oversize frames and header lists,
and CONTINUATION floods. What it cannot judge is *rate*: a peer that opens and resets streams as
fast as it can (the 2023 "rapid reset" attack) stays within the protocol while exhausting the
server. The guard counts resets in a sliding window; past the limit the connection gets GOAWAY
ENHANCE_YOUR_CALM.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

DEFAULT_RESET_LIMIT = 100
DEFAULT_RESET_WINDOW_NS = 1_000_000_000


@dataclass
class ResetRateGuard:
    limit: int = DEFAULT_RESET_LIMIT
    window_ns: int = DEFAULT_RESET_WINDOW_NS
    _times: deque[int] = field(default_factory=deque, init=False)

    def reset_received(self, now_ns: int) -> bool:
        """Note one stream reset by the peer; True when the peer has gone over the limit."""
        times = self._times
        times.append(now_ns)
        horizon = now_ns - self.window_ns
        while times and times[0] <= horizon:
            times.popleft()
        return len(times) > self.limit
