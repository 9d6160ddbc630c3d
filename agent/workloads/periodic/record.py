"""The periodic workload's record, pure: one `Exchange` per exchange (the record's top-level
`exchanges`), and the trial's `metrics` summed up from them and the keepalive tally."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from http import HTTPStatus
from typing import Literal

from agent.workloads.periodic.schedule import is_late

Handshake = Literal["kept", "full", "resumed", "0rtt"]


@dataclass(frozen=True)
class Exchange:
    """One exchange as the record's `exchanges` lists it (spec.EXCHANGE_KEYS)."""

    index: int
    scheduled_mono_ns: int
    start_mono_ns: int  # connect start on a new connection; request start on a kept one
    connected_mono_ns: int | None  # None on a kept connection
    request_mono_ns: int | None  # None where it failed before its request went
    response_end_mono_ns: int | None  # None where it failed
    lateness_s: float
    handshake: Handshake
    early_data_sent: bool
    early_data_accepted: bool | None  # None where none was sent
    connect_s: float | None  # None on a kept connection
    connect_cpu_s: float | None
    response_s: float | None  # request sent -> last response byte
    # None where the engine's tool does not show them (nghttp)
    wire_bytes_sent: int | None
    wire_bytes_received: int | None
    ok: bool
    error: str | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def handshake_of(new: bool, resumed: bool, early_sent: bool) -> Handshake:
    """An exchange's `handshake`: on the kept connection, or on a `new` one that resumed a
    session (its request in 0-RTT early data if `early_sent`) or made a full handshake."""
    if not new:
        return "kept"
    if not resumed:
        return "full"
    return "0rtt" if early_sent else "resumed"


def early_accepted(early_sent: bool, taken: bool, status: int) -> bool | None:
    """Whether the server acted on a request sent as early data: it took the early data in
    its handshake (`taken`) and did not answer 425 Too Early; None where none was sent."""
    if not early_sent:
        return None
    return taken and status != HTTPStatus.TOO_EARLY


@dataclass(frozen=True)
class Keepalive:
    """The keepalive PINGs of a trial: those acknowledged and their bytes on the wire."""

    pings: int = 0
    wire_bytes: int = 0


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def metrics(
    exchanges: Sequence[Exchange], reconnects: int, keepalive: Keepalive
) -> dict[str, object]:
    """The trial's `metrics`, exactly the spec's fields."""
    opened = [e for e in exchanges if e.handshake != "kept" and e.connect_s is not None]
    early = [e for e in exchanges if e.early_data_sent]
    done = [e for e in exchanges if e.response_s is not None]
    lateness = [e.lateness_s for e in exchanges]
    return {
        "exchanges_ok": sum(e.ok for e in exchanges),
        "exchanges_failed": sum(not e.ok for e in exchanges),
        "handshakes_full": sum(e.handshake == "full" for e in opened),
        "handshakes_resumed": sum(e.handshake in ("resumed", "0rtt") for e in opened),
        "handshakes_0rtt": sum(e.handshake == "0rtt" for e in opened),
        "early_data_sent": len(early),
        "early_data_accepted": sum(e.early_data_accepted is True for e in early),
        "early_data_refused": sum(e.early_data_accepted is False for e in early),
        "reconnects": reconnects,
        "late_exchanges": sum(map(is_late, lateness)),
        "lateness_max_s": max(lateness, default=None),
        "connect_mean_s": _mean([e.connect_s for e in opened if e.connect_s is not None]),
        "connect_cpu_mean_s": _mean(
            [e.connect_cpu_s for e in opened if e.connect_cpu_s is not None]
        ),
        "response_mean_s": _mean([e.response_s for e in done if e.response_s is not None]),
        "wire_mean_bytes": _mean(
            [
                e.wire_bytes_sent + e.wire_bytes_received
                for e in exchanges
                if e.wire_bytes_sent is not None and e.wire_bytes_received is not None
            ]
        ),
        "keepalive_pings": keepalive.pings,
        "keepalive_bytes": keepalive.wire_bytes,
    }
