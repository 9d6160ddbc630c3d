"""What an engine is to the testbed, as data (`EngineSpec`): the sides it takes, the protocols,
workloads and SETTINGS it runs, how it takes a window and counts trials, where its code starts.

The agent's commands dispatch through it and the controller's config and sweep ask it; neither
names an engine. Light on purpose: a declaration imports no engine (its entry points are dotted
names, loaded only when that engine runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent.registry import load_dotted

if TYPE_CHECKING:
    import argparse

    from agent.client.options import RunPlan
    from agent.protocols import ProtocolSpec
    from agent.trial_request import TrialRequest
    from agent.workloads.spec import ParamValue, Refusal, WorkloadSpec

    ServeEntry = Callable[
        [argparse.Namespace, ProtocolSpec, WorkloadSpec, dict[str, ParamValue], dict[str, int]],
        int,
    ]
    """An engine's `serve`: the parsed command line, the protocol, the workload, its server
    params and the SETTINGS to announce, each checked; the exit status."""
    TrialEntry = Callable[[TrialRequest, RunPlan, ProtocolSpec], int]
    """An engine's `trial`: the request, the run of trials made of it, its protocol."""

UnrepresentablePolicy = Literal["map", "reject"]
UNREPRESENTABLE_POLICIES: tuple[UnrepresentablePolicy, ...] = ("map", "reject")
DEFAULT_UNREPRESENTABLE_POLICY: UnrepresentablePolicy = "map"
"""What an engine that takes windows as 2^N - 1 bytes does with another count: run the nearest
(recorded, with a warning) or refuse it."""
SYSTEM_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
"""Where Debian installs administrators' tools (nghttpd is in /usr/sbin), searched after PATH:
an ordinary user's PATH (a Pi's agent runs as one) leaves them out."""
TrialCounting = Literal["header", "control"]
"""How an engine's server tells one trial from the next: by the trial header the client sends
on its requests (agent.trial_header), or by trial-control messages beside them
(agent.trial_control), for a server that cannot read headers per trial or a client that sends
none."""


@dataclass(frozen=True)
class ClientRefusal:
    """A value of a workload's param that the engine's client cannot run, with its QUIC tool
    (`quic` True) or its other one (False), and why in a few words. Declared by tool, not by
    protocol name, so a declaration loads no protocol's."""

    workload: str
    param: str
    value: str | int | float | bool
    quic: bool
    reason: str


@dataclass(frozen=True)
class EngineSpec:
    name: str
    doc: str
    label: str  # how reports name it as a run's stack
    client_tool: str | None  # what runs a trial's client side, None: the engine only serves
    server_tool: str  # what serves
    serve: str  # `module:function(ServeCall) -> exit status`: the server side
    trial: str | None = None  # `module:function(TrialCall) -> exit status`: the client side
    # The SETTINGS each side can announce; None: every one the agent knows.
    client_settings: tuple[str, ...] | None = None
    server_settings: tuple[str, ...] | None = None
    # `module:function(bytes) -> bytes`: the window it runs for a count over TCP protocols
    # (nghttp2's nearest 2^N - 1), imported only when asked; None: any window exactly.
    window_map: str | None = None
    # When its client sends WINDOW_UPDATE (agent.h2's flow policies); None: any policy.
    client_window_update_policies: tuple[str, ...] | None = None
    # The protocols (agent.protocols) it runs; None: every one.
    protocols: tuple[str, ...] | None = None
    # The workload kinds it runs; None: every one.
    workloads: tuple[str, ...] | None = None
    # The kinds its client runs besides those, whose server side it does not serve.
    client_workloads: tuple[str, ...] = ()
    # Whether its client checks the server's certificate (against the run's authority).
    checks_certificates: bool = True
    # The Debian packages holding its programs, by program: a node must have them installed
    # (nothing: the agent's wheel or an extra carries it).
    debian_packages: tuple[tuple[str, str], ...] = ()
    # The (client, server) programs it runs over QUIC instead of client_tool, server_tool, and
    # the settings they announce there (None: every one with a QUIC counterpart).
    quic_tools: tuple[str, str] | None = None
    quic_settings: tuple[str, ...] | None = None
    quic_stack: str | None = None  # whose programs those are, as messages name them
    # Its client and its server run on the agent's Python event loop (run.event_loop and
    # run.server_event_loop choose which).
    event_loop: bool = False
    # Its server takes new SETTINGS for new connections on SIGHUP, without a restart (over
    # TCP protocols): a warm sweep keeps it across settings.
    reloads_settings: bool = False
    # The protocols over which its client and its server write a trial's event trace when asked
    # (--events-dir; agent/README.md, Event traces).
    client_traces: tuple[str, ...] = ()
    server_traces: tuple[str, ...] = ()
    # Its client stamps a trial's phase boundaries (connect, exchange, close: the record's
    # `phases`); a tool that shows the agent nothing between its start and its end cannot.
    client_phases: bool = True
    # Its server keeps the agent's connection limits (--handshake-timeout, --idle-timeout,
    # --max-connections); one that keeps its own refuses them.
    connection_limits: bool = False
    # The ways its server counts trials, every one it takes (a server taking control messages
    # listens for them when asked: serve --control-port).
    trial_counting: tuple[TrialCounting, ...] = ("header",)
    # Its client over QUIC sends no trial header: it brackets its trials by control messages,
    # so only a server counting by them can serve it there.
    quic_client_counted_by_control: bool = False
    # Its client over QUIC acknowledges by a chosen ACK policy (agent.h3.ack_policy:
    # ack_eliciting_threshold, max_ack_delay_ms).
    quic_ack_policy: bool = False
    # Workload param values its client cannot run, by workload kind: refused at load and by
    # the agent's `trial` in one line, as a workload's own refusals are.
    client_refusals: tuple[ClientRefusal, ...] = ()

    @property
    def serves_only(self) -> bool:
        return self.client_tool is None

    @property
    def counts_by_header(self) -> bool:
        """Its server tells trials apart by the trial header (else only by control messages,
        one client's at a time)."""
        return "header" in self.trial_counting

    @property
    def takes_trial_control(self) -> bool:
        return "control" in self.trial_counting

    def runs_protocol(self, protocol: str) -> bool:
        return self.protocols is None or protocol in self.protocols

    def runs_workload(self, kind: str, *, client: bool = False) -> bool:
        """Whether it runs the `kind` workload's server side (its client's with `client`)."""
        return (
            self.workloads is None
            or kind in self.workloads
            or (client and kind in self.client_workloads)
        )

    def client_refusal(
        self, kind: str, params: Mapping[str, object], protocol: str
    ) -> Refusal | None:
        """The declared refusal of the `kind` workload's `params` over `protocol` by this
        engine's client (its `message` says why in one line), or None."""
        from agent.protocols import protocol_spec  # noqa: PLC0415
        from agent.workloads.spec import Refusal  # noqa: PLC0415

        quic = protocol_spec(protocol).quic
        for refusal in self.client_refusals:
            if (refusal.workload, refusal.quic) == (kind, quic) and params.get(
                refusal.param
            ) == refusal.value:
                return Refusal(refusal.param, refusal.value, (protocol,), refusal.reason)
        return None

    def settings(self, client: bool) -> tuple[str, ...] | None:
        return self.client_settings if client else self.server_settings

    def tool(self, client: bool) -> str:
        return (self.client_tool if client else None) or self.server_tool

    def system_tools(self, client: bool, quic: Iterable[bool]) -> tuple[str, ...]:
        """The distribution's programs this side runs in a run whose protocols are over QUIC
        or not (`quic`, one flag per protocol): none for an engine the agent's wheel or
        extras carry."""
        if not self.debian_packages:
            return ()
        over_quic = set(quic)
        tools = [self.tool(client)] if False in over_quic else []
        if True in over_quic and self.quic_tools is not None:
            tools.append(self.quic_tools[0 if client else 1])
        return tuple(tools)

    def missing_message(self, tool: str) -> str:
        """One line: `tool` is not installed, and the Debian package that installs it."""
        package = dict(self.debian_packages)[tool]
        return (
            f"{tool} not found on PATH nor in {', '.join(SYSTEM_DIRS)}: "
            f"install the Debian package {package} (apt install {package})"
        )

    def window_on_wire(self, window: int) -> int:
        """The window this engine announces for `window` bytes: itself, or what its
        `window_map` makes of it (nghttp2's nearest 2^N - 1)."""
        if self.window_map is None:
            return window
        on_wire: int = load_dotted(self.window_map)(window)
        return on_wire
