"""The resolved configuration of a sweep: frozen records, one per TOML section.

These are the merged result of every layer (built-in defaults < the TOML file < `--set`
overrides, see `controller.config.load`); they hold canonical, validated values only.
`Config.to_dict()` is the JSON form written into a run's manifest; its nesting mirrors the
TOML file (`nodes.client`, `nodes.server`), so the same dotted keys name the same values.
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.engines import DEFAULT_ENGINE, UnrepresentablePolicy
from agent.h2.settings import SETTING_SPECS
from agent.protocols import DEFAULT_PROTOCOL, PROTOCOLS, protocol_spec
from agent.qlog import DEFAULT_MAX_BYTES
from agent.workloads import DEFAULT_KIND, ParamValue, spec_of
from analysis.trial_columns import MAX_LOST_FRACTION, MAX_SATURATED_FRACTION
from controller.config.meter_sources import DEFAULT_SOURCE, MeterSourceSpec
from controller.config.meter_sources import spec_of as meter_source
from controller.config.profile import DeviceProfile

Order = Literal["randomized-blocked", "sequential"]
Role = Literal["client", "server"]
Ppk2Mode = Literal["ampere", "source"]
Protocol = str  # a protocol's name (agent.protocols declares each)
Engine = str  # an engine's name (agent.engines declares each)
Sensor = Literal["5A", "20A", "30A"]

ORDERS: tuple[Order, ...] = ("randomized-blocked", "sequential")
# The idle baseline is judged in fifths (controller.sweep.baseline), each of two samples at least.
IDLE_SEGMENTS = 5
IDLE_MIN_SAMPLES = 2 * IDLE_SEGMENTS
# How the client node runs its trials: a process per trial, or one warm agent for the sweep.
AgentMode = Literal["fresh", "warm"]
AGENT_MODES: tuple[AgentMode, ...] = ("fresh", "warm")
EventLoop = Literal["asyncio", "uvloop"]
ROLES: tuple[Role, ...] = ("client", "server")
DelayMethod = Literal["netem", "relay"]
DELAY_METHODS: tuple[DelayMethod, ...] = ("netem", "relay")
PPK2_MODES: tuple[Ppk2Mode, ...] = ("ampere", "source")
PPK2_RATE_HZ = 100_000  # the PPK2 samples at this rate; meter.rate_hz must divide it
PPK2_SUPPLY_MV = (800, 5000)  # what its regulator can source
SERVER_ENGINE_AXIS = "server_engine"
"""A sweep axis over nodes.server.engine: the server agent restarts when it changes."""
SENSORS: tuple[Sensor, ...] = ("5A", "20A", "30A")
EnergyWindow = Literal["fetch", "process"]
ENERGY_WINDOWS: tuple[EnergyWindow, ...] = ("fetch", "process")
IdleNoisy = Literal["warn", "refuse"]
IDLE_NOISY: tuple[IdleNoisy, ...] = ("warn", "refuse")

LOCAL_HOST = "local"
"""`host = "local"` runs the node's agent as a subprocess of the controller."""


@dataclass(frozen=True)
class RunConfig:
    name: str = "h2iot"
    seed: int = 1
    repetitions: int = 5
    confidence: float = 0.90
    order: Order = "randomized-blocked"
    idle_baseline_s: float = 5.0
    retries: int = 2
    trial_timeout_s: float = 120.0
    agent: AgentMode = "fresh"
    # The client agent's event loop (agent.event_loop): uvloop is the `uvloop` extra, which
    # `nodes deploy` installs when a config asks for it.
    event_loop: EventLoop = "asyncio"
    # The server agent's (`serve --event-loop`), the same extra: the loop is much of what the
    # server costs per round trip too (benchmarks/README.md, server_vs_nghttpd.py).
    server_event_loop: EventLoop = "asyncio"
    # Opt-in early stop (analysis.stopping): off while stop_half_width is None.
    stop_metric: str = "client_response_s"
    stop_half_width: float | None = None
    stop_min_n: int = 5
    # Each trial's event trace (qlog) from the client agent, in the run's events/ folder
    # (data/README.md); a trace longer than events_max_bytes is cut at an event, saying so.
    events: bool = False
    events_max_bytes: int = DEFAULT_MAX_BYTES


AxisValue = ParamValue
"""A swept value: an HTTP/2 setting's integer, or a workload parameter of any of its kinds."""
Point = tuple[tuple[str, AxisValue], ...]
"""A grid point as swept, hashable: (axis name, value) in axis order, of every kind of axis."""

PROTOCOL_AXIS = "protocol"
"""[workload] protocol, sweepable: the server agent restarts when it changes."""
DATAGRAM_AXIS = "datagram_bytes"
"""[workload] datagram_bytes, HTTP/3's largest UDP payload (max_udp_payload_size) both agents
send and take, sweepable; None: the agent's default (agent.h3.settings)."""

ACK_AXES = ("ack_eliciting_threshold", "max_ack_delay_ms")
"""[workload] keys of HTTP/3's receiver (the client): packets it takes before it acknowledges at
once, and the longest it holds an acknowledgement (announced as max_ack_delay), sweepable; None:
qh3's own (agent.h3.ack_policy)."""

FLOW_KEYS = ("connection_window", "window_update_policy")
"""The client's flow-control keys of [workload]: sweepable beside the settings and parameters."""


@dataclass(frozen=True)
class SweepConfig:
    # Ordered (name, values): canonical HTTP/2 setting names, flow-control keys and workload
    # parameters alike; the grid is their product in this order.
    axes: tuple[tuple[str, tuple[AxisValue, ...]], ...] = (
        ("initial_window_size", (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535)),
    )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.axes)

    @property
    def size(self) -> int:
        """How many grid points the axes span."""
        return math.prod(len(values) for _, values in self.axes)

    def points(self) -> list[Point]:
        """Every grid point, the last axis varying fastest."""
        names = self.names
        return [
            tuple(zip(names, values, strict=True))
            for values in itertools.product(*(values for _, values in self.axes))
        ]


@dataclass(frozen=True)
class WorkloadConfig:
    kind: str = DEFAULT_KIND
    # Every parameter of the kind, canonical, defaults filled in (agent.workloads declares them).
    params: tuple[tuple[str, ParamValue], ...] = field(
        default_factory=lambda: tuple(spec_of(DEFAULT_KIND).defaults().items())
    )
    connection_window: int | None = None  # None: the same as the stream window, as the study did
    window_update_policy: str = "half"
    # nghttp2 takes windows as 2^N - 1 bytes over HTTP/2 (nghttp, nghttpd): map other values to
    # the nearest, or refuse them. Its HTTP/3 tools (ngtcp2's) take any window exactly.
    unrepresentable_window: UnrepresentablePolicy = "map"
    protocol: Protocol = DEFAULT_PROTOCOL
    datagram_bytes: int | None = None
    ack_eliciting_threshold: int | None = None
    max_ack_delay_ms: int | None = None

    def param(self, name: str) -> ParamValue:
        return dict(self.params)[name]


@dataclass(frozen=True)
class TrialPoint:
    """Everything one grid point decides, each value in the one form it keeps up to the wire:
    the SETTINGS both agents announce, the client's flow control, the workload's parameters.
    Built once per grid point (`Config.point`) by the planner or a search; a trial carries it."""

    axes: Point  # as swept: the row's axis columns, what the dashboard and the searches show
    settings: tuple[tuple[str, int], ...]
    connection_window: int | None  # None: the agent's default (65535)
    window_update_policy: str
    params: tuple[tuple[str, ParamValue], ...]
    server_engine: Engine | None = None  # swept (server_engine); None: nodes.server.engine
    protocol: Protocol = DEFAULT_PROTOCOL
    datagram_bytes: int | None = None  # HTTP/3's; None: the agents' default
    ack_eliciting_threshold: int | None = None  # HTTP/3 client's (ACK_AXES); None: qh3's own
    max_ack_delay_ms: int | None = None

    @property
    def tls(self) -> bool:
        return protocol_spec(self.protocol).tls

    @property
    def quic(self) -> bool:
        return protocol_spec(self.protocol).quic

    def param(self, name: str) -> ParamValue:
        return dict(self.params)[name]


@dataclass(frozen=True)
class NodeConfig:
    role: Role
    host: str = LOCAL_HOST
    user: str | None = None
    port: int = 22
    key: Path | None = None
    known_hosts: Path | None = None
    # Local nodes run the agent with the controller's own interpreter, which has its packages.
    python: str = sys.executable
    # Local nodes: "" means the sweep engine picks a directory under the run.
    deploy_dir: str = ""
    cpu: int | None = None
    address: str = "127.0.0.1"
    # The interface of the node's end of the client<->server data link, shaped by [link].
    data_interface: str | None = None
    # What runs the protocol on the node (agent.engines): the agent's own, nghttp / nghttpd, or
    # (a server of the api workload) hypercorn + Starlette.
    engine: Engine = DEFAULT_ENGINE
    # The client's wired trial-marker line, "gpio:CHIP:LINE" (docs/bring-up.md); None: none
    # (a local client with a modelled meter always has its software line).
    marker: str | None = None
    # The constrained device it emulates (cgroups, controller.device); None: none.
    device: DeviceProfile | None = None
    # SSH nodes: apply `device` on the node's host too (its own hardware is its device otherwise).
    remote_device: bool = False
    http_port: int = 8443
    # An entry of nodes.clients: its name (client1, client2, ... unless given); None otherwise.
    name: str | None = None

    @property
    def is_local(self) -> bool:
        return self.host == LOCAL_HOST


@dataclass(frozen=True)
class MeterConfig:
    source: str = DEFAULT_SOURCE  # a name of controller.config.meter_sources
    port: str | None = None
    baud: int = 500_000
    rate_hz: int = 1000
    channels: tuple[tuple[Role, int], ...] = (("client", 0),)
    sensor: Sensor = "5A"
    supply_v: float = 5.0
    calibration: Path | None = None
    shunt_ohm: float = 0.1  # the INA219s' and INA226s' shunt resistor
    # A modelled meter's network term, per byte on the node's interface (0: none): PowerPi's
    # slope, controller.meter.power_model.POWERPI_NJ_PER_BYTE, written out here because the
    # config is imported on SSH nodes (device set-up), where the meter's numpy is not; a test
    # checks the two agree.
    network_nj_per_byte: float = 4.813 * 8
    # PPK2 (source "ppk2"): ampere meter in an external supply, or source meter powering the
    # node at supply_mv; the logic input D0..D7 (0..7) the client's marker GPIO is wired to.
    mode: Ppk2Mode = "ampere"
    supply_mv: int | None = None
    marker_input: int = 0
    # The shares of a trial's samples clipped at full scale, or lost, above which the report
    # flags the trial (analysis.trial_columns holds the defaults, for runs that predate them).
    max_saturated_fraction: float = MAX_SATURATED_FRACTION
    max_lost_fraction: float = MAX_LOST_FRACTION

    @property
    def modelled(self) -> bool:
        """Driven by the power model of local nodes: the virtual meter, simavr, or a PPK2 with
        no port (the emulated PPK2)."""
        return self.spec.is_modelled(self.port)

    @property
    def spec(self) -> MeterSourceSpec:
        return meter_source(self.source)

    @property
    def power_v(self) -> float:
        """The voltage the node's current is power at: `supply_mv` where set (a PPK2 powering
        the node, or saying what its supply is), else `supply_v`."""
        return self.supply_mv / 1000 if self.supply_mv is not None else self.supply_v

    def channel_of(self, role: Role) -> int | None:
        """The channel measuring this node's supply (analog input n, an INA219's I2C address
        0x40..0x43, or an INA226's address with INA226_CHANNEL set), or None if it is not
        metered."""
        return dict(self.channels).get(role)


@dataclass(frozen=True)
class LinkConfig:
    rate_mbit: float | None = None  # None: unshaped
    loss_pct: float = 0.0
    delay_ms: float = 0.0
    # "netem" on each node's egress; "relay": a userspace delay line between two local nodes'
    # namespaces (controller.device.wire), for kernels without netem.
    delay_method: DelayMethod = "netem"

    @property
    def relayed(self) -> bool:
        """The delay is the relay's, not netem's."""
        return self.delay_method == "relay" and self.delay_ms > 0

    @property
    def is_shaped(self) -> bool:
        return self.rate_mbit is not None or self.loss_pct > 0 or self.delay_ms > 0


@dataclass(frozen=True)
class EnergyConfig:
    # What a trial's energy integrates over: the fetch (its marker edges), or the client's whole
    # trial process, start-up included, as the study did ("over each process's duration").
    window: EnergyWindow = "fetch"
    # The idle baseline (run.idle_baseline_s long, controller.sweep.baseline): quiet when every
    # part of it is within this much of the rest (beyond the meter's own noise).
    idle_tolerance_mw: float = 5.0
    idle_wait_s: float = 30.0  # how long to wait for quiet nodes before judging
    idle_noisy: IdleNoisy = "warn"  # a baseline still noisy then: warn, or refuse the sweep
    idle_end: bool = True  # measure it again after the last trial, to bound its drift


SearchHolds = Literal["at_least", "at_most"]
SEARCH_HOLDS: tuple[SearchHolds, ...] = ("at_least", "at_most")
FailedTrial = Literal["give_up", "fails"]
FAILED_TRIAL: tuple[FailedTrial, ...] = ("give_up", "fails")
SearchKind = Literal["breakdown", "optimize"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("breakdown", "optimize")
# optuna's samplers the optimising search offers (configs/README.md says why TPE is the default).
Sampler = Literal["tpe", "nsga2", "random"]
SAMPLERS: tuple[Sampler, ...] = ("tpe", "nsga2", "random")


@dataclass(frozen=True)
class SearchConfig:
    """[search]: the breakdown search (controller.sweep.breakdown). For each point of the
    sweep's axes (a group), bisect `param` over log [low, high] for where `metric` (divided by
    the `relative_to` column, if any) stops holding `threshold`."""

    param: str  # a numeric workload parameter, not a sweep axis
    low: float
    high: float
    metric: str  # a trials.csv column
    relative_to: str | None = None  # a trials.csv column; None: the metric itself is compared
    threshold: float = 0.75
    holds: SearchHolds = "at_least"  # the metric passes while >= threshold (at_most: <=)
    repetitions: int = 3  # trials per round at a probe
    max_repetitions: int = 12  # most trials at one probe
    resolution: float = 1.25  # done when the failing / passing probe values are within this
    # Bytes per unit of `param` (8 for doubles): breakdown.csv's MB/s at the breakdown is
    # value x unit_bytes x relative_to (a rate per second); None: no MB/s.
    unit_bytes: float | None = None
    # A probe trial that fails every attempt: give the group up, or fail the probe.
    failed_trial: FailedTrial = "give_up"


@dataclass(frozen=True)
class OptimizeConfig:
    """[search] kind = "optimize" (controller.sweep.optimize_run): the point of the sweep's
    grid that minimises one objective, or the Pareto front of two, within `budget` trials,
    each point measured until its interval tells it from the best so far."""

    objectives: tuple[str, ...]  # one or two trials.csv columns, each minimised
    budget: int  # most trials the search runs
    relative_to: str | None = None  # a trials.csv column dividing the first objective
    sampler: Sampler = "tpe"
    repetitions: int = 3  # trials per round at a point
    max_repetitions: int = 12  # most trials at one point
    # A point whose intervals are within this fraction of its means needs no more trials.
    tolerance: float = 0.05
    kind: Literal["optimize"] = "optimize"


def _plain(value: Any) -> Any:
    """A JSON-able copy: paths become strings, tuples lists, records tables."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, DeviceProfile):
        return asdict(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def _section(record: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        name: _plain(getattr(record, name))
        for name in record.__dataclass_fields__
        if name not in skip
    }


@dataclass(frozen=True)
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    client: NodeConfig = field(default_factory=lambda: NodeConfig(role="client", cpu=0))
    server: NodeConfig = field(default_factory=lambda: NodeConfig(role="server", cpu=1))
    meter: MeterConfig = field(default_factory=MeterConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    search: SearchConfig | OptimizeConfig | None = None  # None: a plain sweep of the grid
    # nodes.clients: the client nodes a trial's load is spread over, `client` the first of them
    # (the metered one); empty for the one client of nodes.client alone.
    clients: tuple[NodeConfig, ...] = ()
    # Provenance, not content: two configs with the same values are equal wherever they came from.
    source: str = field(default="<defaults>", compare=False)
    layers: tuple[str, ...] = field(default=("<defaults>",), compare=False)
    # (dotted key, layer) for every value a layer other than the defaults set.
    origins: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def node(self, role: Role) -> NodeConfig:
        return self.client if role == "client" else self.server

    @property
    def client_nodes(self) -> tuple[NodeConfig, ...]:
        """Every client node: nodes.clients, else nodes.client alone."""
        return self.clients or (self.client,)

    @property
    def protocols(self) -> tuple[Protocol, ...]:
        """The protocols the run's trials use: the swept ones, else [workload] protocol."""
        swept = dict(self.sweep.axes).get(PROTOCOL_AXIS) or (self.workload.protocol,)
        return tuple(p for p in PROTOCOLS if p in swept)

    def point(self, point: Point) -> TrialPoint:
        """The grid point `point` over this config's other values."""
        axes = dict(point)
        settings = {name: int(value) for name, value in axes.items() if name in SETTING_SPECS}
        flow = {name: axes[name] for name in FLOW_KEYS if name in axes}
        params = dict(self.workload.params)
        params.update((name, value) for name, value in axes.items() if name in params)
        connection_window = flow.get("connection_window", self.workload.connection_window)
        if connection_window is None:
            # As the study passed the same N to nghttp's -w and -W.
            connection_window = settings.get("initial_window_size")
        return TrialPoint(
            axes=point,
            settings=tuple(settings.items()),
            connection_window=None if connection_window is None else int(connection_window),
            window_update_policy=str(
                flow.get("window_update_policy", self.workload.window_update_policy)
            ),
            params=tuple(params.items()),
            server_engine=_optional_str(axes.get(SERVER_ENGINE_AXIS)),
            protocol=next(
                (p for p in PROTOCOLS if p == axes.get(PROTOCOL_AXIS)), self.workload.protocol
            ),
            datagram_bytes=_optional_int(axes.get(DATAGRAM_AXIS, self.workload.datagram_bytes)),
            ack_eliciting_threshold=_optional_int(
                axes.get("ack_eliciting_threshold", self.workload.ack_eliciting_threshold)
            ),
            max_ack_delay_ms=_optional_int(
                axes.get("max_ack_delay_ms", self.workload.max_ack_delay_ms)
            ),
        )

    def trial_points(self) -> list[TrialPoint]:
        """Every grid point of the sweep as a TrialPoint, in grid order."""
        return [self.point(point) for point in self.sweep.points()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, nested like the TOML file; None stands for an unset optional key."""
        return {
            "run": _section(self.run),
            "sweep": {name: list(values) for name, values in self.sweep.axes},
            "workload": {
                "kind": self.workload.kind,
                **dict(self.workload.params),
                **_section(self.workload, skip=("kind", "params")),
            },
            "nodes": {
                "client": _section(self.client, skip=("role", "http_port", "name")),
                "server": _section(self.server, skip=("role", "name")),
                **(
                    {"clients": [_section(c, skip=("role", "http_port")) for c in self.clients]}
                    if self.clients
                    else {}
                ),
            },
            "meter": {**_section(self.meter), "channels": dict(self.meter.channels)},
            "link": _section(self.link),
            "energy": _section(self.energy),
            # Only a search run has it: a plain sweep's manifest reads as before.
            **({} if self.search is None else {"search": _section(self.search)}),
            "source": self.source,
            "layers": list(self.layers),
            "origins": dict(self.origins),
        }


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
