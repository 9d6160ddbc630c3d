"""The JSON record of one client trial, the agent's output contract with the controller: the
fields every workload shares, the workload's `params` and `metrics`, and the workload's own
top-level fields (`extra`; the page keeps its `resources` and `body_bytes` there)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

PHASE_MARKS = (
    "marker_raised_mono_ns",  # the marker's rising edge: the window, and connect, start
    "connect_done_mono_ns",  # the connection usable (TCP + TLS, or QUIC's handshake, done)
    "first_byte_mono_ns",  # the first response's headers; left out when none came
    "exchange_done_mono_ns",  # the workload's last response byte
    "close_done_mono_ns",  # GOAWAY and the TCP close, or QUIC's CONNECTION_CLOSE, sent
    "marker_lowered_mono_ns",  # the marker's falling edge: the window ends
)
"""A record's `phases`, in order on the clock; the controller reads them by these names."""


@dataclass(frozen=True)
class ClientRecord:
    """One trial, by either engine. Times relative to the trial's start are in seconds; clocks
    in ns."""

    ok: bool
    error: str | None
    trial_id: str
    repetition: int
    url: str
    workload: str
    engine: str
    agent_version: str
    protocol: str  # agent.protocols: what the trial's connection ran
    tls: bool  # the protocol's, repeated for readers of records written before it was named
    settings: Mapping[str, int]  # what the client announced
    flow_control: Mapping[str, object]
    peer_settings: Mapping[str, int]
    response_s: float  # connect start -> the trial's last byte
    ttfb_s: float | None  # connect start -> the first response's headers; None without any
    cpu_user_s: float
    cpu_sys_s: float
    cpu_s: float
    cpu_pct: float
    rss_peak_bytes: int
    rss_peak_is_fetch: bool  # the peak is this trial's own (its mark was reset at the start)
    sent: Mapping[str, object] | None  # None where the engine cannot count (nghttp2: no frames)
    received: Mapping[str, object] | None
    window_updates_sent: int | None
    t_wall_start_ns: int
    t_wall_end_ns: int
    t_mono_start_ns: int
    t_mono_end_ns: int
    probe_overhead_s: float
    cpu_pin: int | None
    marker: str
    params: Mapping[str, object]  # the workload's params the trial ran with, canonical
    metrics: Mapping[str, object]  # exactly the workload spec's fields
    extra: Mapping[str, object]  # the workload's own top-level fields
    # The node's CPU clock, governor, temperature, throttling, other load (agent.conditions);
    # None where the trial did not run.
    conditions: Mapping[str, object] | None = None
    # Connect start -> the connection ready for HTTP/2 (TCP, and TLS's handshake with `tls`),
    # and the process's CPU over that span; None where the engine cannot tell (nghttp2: CPU)
    # or no connection was made.
    connect_s: float | None = None
    connect_cpu_s: float | None = None
    tls_version: str | None = None  # as the TLS library names it ("TLSv1.3"); None without TLS
    # HTTP/3: the QUIC connection's counts (agent.client.h3); None over HTTP/2.
    transport: Mapping[str, object] | None = None
    # The h2 engine's event loop, "asyncio" or "uvloop" (agent.event_loop); None where the
    # trial did not run on one (the nghttp2 engine's tools, a trial that could not start).
    event_loop: str | None = None
    # The protocol's error code of the peer error that failed the trial (PeerProtocolError's
    # `error_code`: a GOAWAY's, a reset's, a QUIC close's); None, and left out, otherwise.
    error_code: Mapping[str, object] | None = None
    # What the client announced and what it received from the server, by the protocol's own
    # names (agent.protocols.in_force): HTTP/2 SETTINGS; QUIC transport parameters and HTTP/3
    # SETTINGS. `settings_received` None where the engine cannot observe it (the nghttp2
    # engine's tools, whose announcement is read from their argv) or nothing arrived; both
    # None where the trial never ran.
    settings_announced: Mapping[str, int] | None = None
    settings_received: Mapping[str, int] | None = None
    # The trial's phase boundaries on the marker's clock (CLOCK_MONOTONIC, ns), which the
    # controller places on the meter's samples (`PHASE_MARKS`); None, and left out, where the
    # engine cannot see them (nghttp2's tools) or the trial failed.
    phases: Mapping[str, int] | None = None

    def to_dict(self) -> dict[str, object]:
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        for name in ("settings", "flow_control", "peer_settings", "params", "metrics"):
            record[name] = dict(record[name])
        for name in ("transport", "error_code", "phases"):
            value = getattr(self, name)
            if value is None:
                del record[name]
            else:
                record[name] = dict(value)
        for name in ("sent", "received", "settings_announced", "settings_received"):
            if record[name] is not None:
                record[name] = dict(record[name])
        return {**record, **self.extra}
