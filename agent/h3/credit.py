"""The flow-control credit a data sender sees granted over QUIC, per trial. Pure.

A receiver with a fixed window W grants, in each MAX_STREAM_DATA, a limit of at most (bytes it
has consumed) + W; one that auto-tunes grants more as the transfer goes on. The sender cannot
see what the receiver had received when it granted, only what the sender had put on the wire
by the time the grant arrived (never less than what was received): `largest_ahead_bytes` is the
largest (limit - bytes sent on that stream when the grant arrived), a bound that a fixed window
keeps at or under W and an auto-tuned one exceeds once it grows past W plus what is in flight.
Counted are the grants that raised a limit (qh3's core reports only those: a repeated or
reordered frame raises nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CreditSummary:
    """Over one trial: the MAX_STREAM_DATA and MAX_DATA grants received that raised a limit,
    and the largest credit each granted ahead of the data sent (bytes; None without one)."""

    max_stream_data_frames: int
    max_data_frames: int
    largest_stream_credit_ahead_bytes: int | None
    largest_connection_credit_ahead_bytes: int | None

    def to_dict(self) -> dict[str, int | None]:
        return {
            "max_stream_data_frames": self.max_stream_data_frames,
            "max_data_frames": self.max_data_frames,
            "largest_stream_credit_ahead_bytes": self.largest_stream_credit_ahead_bytes,
            "largest_connection_credit_ahead_bytes": self.largest_connection_credit_ahead_bytes,
        }


@dataclass
class CreditLedger:
    """Grants as they arrive; `summary()` at any time, `reset()` between trials."""

    stream_frames: int = 0
    connection_frames: int = 0
    stream_ahead: int | None = None
    connection_ahead: int | None = None
    _limits: dict[int, int] = field(default_factory=dict)
    _connection_limit: int = 0

    def stream_grant(self, stream_id: int, limit: int, sent_bytes: int) -> None:
        """MAX_STREAM_DATA(`stream_id`, `limit`) arrived when `sent_bytes` of the stream were
        on the wire."""
        if limit <= self._limits.get(stream_id, -1):
            return
        self._limits[stream_id] = limit
        self.stream_frames += 1
        self.stream_ahead = _larger(self.stream_ahead, limit - sent_bytes)

    def connection_grant(self, limit: int, sent_bytes: int) -> None:
        """MAX_DATA(`limit`) arrived when `sent_bytes` of every stream were on the wire."""
        if limit <= self._connection_limit:
            return
        self._connection_limit = limit
        self.connection_frames += 1
        self.connection_ahead = _larger(self.connection_ahead, limit - sent_bytes)

    def forget_stream(self, stream_id: int) -> None:
        self._limits.pop(stream_id, None)

    def reset(self) -> None:
        """A new trial's counts; the limits already granted stay (a later grant must raise
        them to count)."""
        self.stream_frames = self.connection_frames = 0
        self.stream_ahead = self.connection_ahead = None

    def summary(self) -> CreditSummary:
        return CreditSummary(
            self.stream_frames, self.connection_frames, self.stream_ahead, self.connection_ahead
        )


def _larger(current: int | None, value: int) -> int:
    return value if current is None else max(current, value)
