"""What a client command runs: the options every trial's connection shares (`TrialOptions`)
and the run of trials around them (`RunPlan`), for either engine.

Both are built once, where the command line is parsed and each value is range-checked; nothing
downstream checks or reshapes them again. The SETTINGS the client asks for are one mapping,
the stream window (`initial_window_size`) one of its entries, from the command line to the
SETTINGS frame (the h2 engine) or to nghttp's `-w` (the nghttp2 engine).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from agent.h2.flow import FlowControlOptions
from agent.h2.settings import initial_window_size
from agent.protocols import DEFAULT_PROTOCOL, protocol_spec
from agent.qlog import DEFAULT_MAX_BYTES
from agent.workloads import DEFAULT_KIND

if TYPE_CHECKING:
    from agent.h3.ack_policy import AckPolicy
    from agent.h3.settings import QuicWindows

DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class TrialOptions:
    """How each trial connects and what it announces, whatever the engine and workload."""

    # Canonical names (agent.h2.settings), checked values: what the client asks to announce. Each
    # engine adds only its own defaults for names absent here.
    settings: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    flow: FlowControlOptions = field(default_factory=FlowControlOptions)
    timeout_s: float = DEFAULT_TIMEOUT_S
    insecure: bool = False  # TLS: skip certificate checks
    ca_file: str | None = None  # TLS: trust this CA bundle
    cpu_pin: int | None = None  # the core the process is pinned to, recorded
    protocol: str = DEFAULT_PROTOCOL  # agent.protocols: what each trial's connection runs
    datagram_bytes: int | None = None  # HTTP/3: max_udp_payload_size; None: agent.h3's default
    udp_buffer_bytes: int | None = None  # HTTP/3: socket buffers asked; None: agent.h3's default
    # Each trial's qlog goes to events_dir/<trial_id>.client.sqlog (agent.event_trace); None: no
    # trace, and the connection pays nothing for one.
    events_dir: Path | None = None
    events_max_bytes: int = DEFAULT_MAX_BYTES
    ack_policy: AckPolicy | None = None  # HTTP/3: when the client ACKs; None: qh3's own

    @property
    def quic(self) -> bool:
        """Over QUIC (agent.h3), not HTTP/2 over TCP."""
        return protocol_spec(self.protocol).quic

    @property
    def initial_window_size(self) -> int:
        return initial_window_size(self.settings)

    def quic_windows(self) -> QuicWindows:
        """The settings as QUIC's: the stream window, the connection window as initial_max_data,
        the datagram size and the ACK policy (checked where the options were built)."""
        from agent.h3.ack_policy import QH3_OWN  # noqa: PLC0415
        from agent.h3.settings import QuicWindows  # noqa: PLC0415

        return QuicWindows.from_settings(
            self.settings,
            default_stream_window_bytes=self.initial_window_size,
            connection_window_bytes=self.flow.connection_window,
            datagram_bytes=self.datagram_bytes,
            ack_policy=self.ack_policy or QH3_OWN,
        )


@dataclass(frozen=True)
class PeerClock:
    """The server's wall clock minus this client's, within +/- `uncertainty_ns`, as the
    controller measured it: a time t on the server's clock reads t - offset_ns on ours."""

    offset_ns: int
    uncertainty_ns: int


@dataclass(frozen=True)
class RunPlan:
    """`repeat` trials against `url`, each on a connection of its own, one output line each."""

    url: str
    options: TrialOptions
    trial_id: str
    engine: str  # agent.engines: what runs the trials, named in each record
    workload: str = DEFAULT_KIND
    # The workload's client params, every one, canonical (checked where they were parsed);
    # values as agent.workloads.spec.ParamValue.
    params: Mapping[str, int | float | str | bool] = field(
        default_factory=lambda: MappingProxyType({})
    )
    repeat: int = 1
    json_lines: bool = False
    marker: str = "none"
    manifest_path: Path | None = None  # page: the site manifest bodies are checked against
    trial_control: str | None = None  # HOST:PORT of an nghttpd server's agent, or None
    # Workloads that time across both clocks (stream) map the server's times through it;
    # None: they are taken as read.
    peer_clock: PeerClock | None = None

    def trial_ids(self) -> list[str]:
        """The ids of the trials: the id itself, or ID-1 .. ID-R."""
        if self.repeat == 1:
            return [self.trial_id]
        return [f"{self.trial_id}-{r}" for r in range(1, self.repeat + 1)]
