"""The receiver's ACK policy as a swept setting: how many packets it takes in before it
acknowledges at once, and how long it may hold an acknowledgement (max_ack_delay).

How qh3 2.1.0 acknowledges (its native core; read from its behaviour on 2026-12-06, the Python
layer passes nothing that sets it): an ACK goes out at once after every second ack-eliciting
packet (RFC 9000 section 13.2.2's recommendation), else when the core's `ack_application`
timer fires 1 ms after the first unacknowledged one, whatever the RTT and whatever
max_ack_delay the endpoint announces (qh3's server announces 25 ms; its client announces
nothing, which RFC 9000 section 18.2 reads as 25 ms). Neither number is in qh3's API: the
`max_ack_delay` its core's constructor takes is only the peer's assumed one until the peer's
transport parameters arrive.

So a policy other than qh3's own is made in the shell around the core, which sends only what
it is polled for: `AckGate` holds the endpoint's transmits after it received packets until
`ack_eliciting_threshold` of them came in or the first waited `max_ack_delay_ms`; the core then
sends one ACK covering them all. The endpoint announces that max_ack_delay in its transport
parameters, as RFC 9000 asks (the peer adds it to its probe timeout). What it costs, stated:
- the gate counts packets received, not ack-eliciting ones (the core does not tell them
  apart): a packet carrying only an ACK (the server's, of the client's request or credit)
  counts toward the threshold, which only makes an ACK go sooner;
- it holds whatever the core would send with the ACK, a flow-control update (MAX_DATA,
  MAX_STREAM_DATA) too, which the core does not show: so it never holds once half the
  smaller receive window has come in since the endpoint last sent (where a sliding window's
  credit falls due), else a window of fewer packets than the threshold would stall the sender
  for `max_ack_delay_ms` each window (65535 bytes at 32: a 2 MB page in 11 s, not 50 ms). A
  window that small then sets the ACKs' pace, not the threshold; stream data the endpoint
  has queued (a request) is never held, nor anything before the handshake is confirmed or
  once the connection closes;
- while it holds, a core timer other than its ACK and pacing ones (loss detection, idle)
  hidden behind the ACK timer is looked at when the hold ends, at most `max_ack_delay_ms`
  later.
Only for the qh3 versions whose core was read (`CHECKED_QH3`): elsewhere a policy other than
qh3's own is refused, never run on a guess. Pure (no qh3 import: the controller checks a
config's values here); agent.h3.stack puts the gate and the announcement on a connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.errors import SettingsError

CHECKED_QH3 = frozenset({"2.1.0"})

# RFC 9000 section 13.2.2: a receiver acknowledges at least every second ack-eliciting packet;
# qh3's core does exactly that and cannot be made to acknowledge sooner from outside it.
DEFAULT_ACK_ELICITING_THRESHOLD = 2
MIN_ACK_ELICITING_THRESHOLD = 2
MAX_ACK_ELICITING_THRESHOLD = 1000
# RFC 9000 section 18.2: max_ack_delay defaults to 25 ms; values of 2^14 ms or more are invalid.
# Under 1 ms would be a lie: qh3's core itself waits 1 ms.
DEFAULT_MAX_ACK_DELAY_MS = 25
MIN_MAX_ACK_DELAY_MS = 1
MAX_MAX_ACK_DELAY_MS = 2**14 - 1


def _check(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise SettingsError(f"{name} {value} is outside {low}..{high}")


@dataclass(frozen=True)
class AckPolicy:
    """When the receiver acknowledges: after `ack_eliciting_threshold` packets, or
    `max_ack_delay_ms` after the first it has not acknowledged."""

    ack_eliciting_threshold: int = DEFAULT_ACK_ELICITING_THRESHOLD
    max_ack_delay_ms: int = DEFAULT_MAX_ACK_DELAY_MS

    def __post_init__(self) -> None:
        _check(
            "ack_eliciting_threshold",
            self.ack_eliciting_threshold,
            MIN_ACK_ELICITING_THRESHOLD,
            MAX_ACK_ELICITING_THRESHOLD,
        )
        _check(
            "max_ack_delay_ms", self.max_ack_delay_ms, MIN_MAX_ACK_DELAY_MS, MAX_MAX_ACK_DELAY_MS
        )

    @property
    def is_qh3s_own(self) -> bool:
        """What qh3's core does unaided (its 1 ms delay is within the default 25 ms)."""
        return self == QH3_OWN

    def gate(self, qh3_version: str, credit_bytes: int) -> AckGate | None:
        """The gate that makes this policy on qh3 `qh3_version` for a receiver whose credit is
        due every `credit_bytes` (None: qh3's own needs none); SettingsError where that core
        was never read."""
        if self.is_qh3s_own:
            return None
        if qh3_version not in CHECKED_QH3:
            raise SettingsError(
                f"ack_eliciting_threshold and max_ack_delay_ms are made around qh3 "
                f"{', '.join(sorted(CHECKED_QH3))}'s core, not qh3 {qh3_version}'s"
            )
        return AckGate(self, credit_bytes)

    def to_dict(self) -> dict[str, int]:
        return {
            "ack_eliciting_threshold": self.ack_eliciting_threshold,
            "max_ack_delay_ms": self.max_ack_delay_ms,
        }


QH3_OWN = AckPolicy()
"""RFC 9000's defaults, which qh3's core keeps unaided."""


class AckGate:
    """Whether a receiver's transmits wait for more packets (the module's docstring). Pure:
    `now` is the caller's clock, in seconds. `credit_bytes`: received bytes after which the
    receiver's flow-control credit may be due (half its smaller window): a hold never keeps
    the sender waiting for credit, only for an ACK."""

    def __init__(self, policy: AckPolicy, credit_bytes: int) -> None:
        self.policy = policy
        self._threshold = policy.ack_eliciting_threshold
        self._delay_s = policy.max_ack_delay_ms / 1000
        self._credit_bytes = credit_bytes
        self._unacked = 0  # packets received since the endpoint last sent
        self._unacked_bytes = 0  # their UDP payload bytes
        self._first_at: float | None = None  # when the first of them came

    def received(self, packets: int, size_bytes: int, now: float) -> None:
        if packets <= 0:
            return
        if self._first_at is None:
            self._first_at = now
        self._unacked += packets
        self._unacked_bytes += size_bytes

    def holds(self, now: float) -> bool:
        """Whether to send nothing yet: some packets wait, fewer than the threshold, less than
        the credit's bytes, the first for less than max_ack_delay."""
        return (
            self._first_at is not None
            and self._unacked < self._threshold
            and self._unacked_bytes < self._credit_bytes
            and now < self._first_at + self._delay_s
        )

    def sent(self) -> None:
        """The endpoint sent: its packets carry the ACK of all it received."""
        self._unacked = self._unacked_bytes = 0
        self._first_at = None

    @property
    def release_at(self) -> float | None:
        """When the hold ends by time, if packets wait."""
        return None if self._first_at is None else self._first_at + self._delay_s
