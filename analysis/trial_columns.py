"""trials.csv's columns, declared here once (run format version 2, data/README.md).

The controller writes a run by them: its recorder the files and the header (`header`), its row
builder (controller.sweep.rows) every cell, copying what a column's `source` names and deriving
the rest; the analysis reads a run by them. The controller may import analysis, never the
reverse, so the declaration lives here. Adding a column is a line in one of the tuples below
(and its row in data/README.md, which a test holds to these).

After the leading columns come one column per sweep axis, named as in the config (settings and
workload parameters alike), then the common metrics and the window's phases, then the
workload's own: `<kind>_<field>`
for each field its declaration lists (agent.workloads), then each node's conditions over the
trial: `<role>_<field>` (agent.conditions), then each node's kernel work over the trial (its
softirqs, context switches and UDP/TCP counts, agent.kernel_counters): `<role>_<field>`.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.h2.settings import SETTING_SPECS
from agent.workloads import DEFAULT_KIND, SPECS

MAX_SATURATED_FRACTION = 0.0
"""The config's default `meter.max_saturated_fraction`: a trial with more of its `samples` than
this clipped at the meter's full scale is flagged, its energy a lower bound. Any clipped
sample reads less than the load drew, so by default one is enough."""
MAX_LOST_FRACTION = 0.01
"""The config's default `meter.max_lost_fraction`: a trial that lost more than this share of
its window's samples (`samples_lost` of `samples + samples_lost`) is flagged, its energy
bridged across the gaps. An old run's manifest has neither key: these stand in."""

SOURCES = ("trial", "point", "client", "server", "power", "energy")
"""What a trial's cells come from, as a column's `source` names them: the planned trial, its
grid point (the controller's TrialPoint), the client's and the server's trial records (JSON
lines, agent/README.md), the trial's power window and its energy (the controller's
PowerWindow and WindowEnergy)."""


@dataclass(frozen=True)
class Column:
    name: str
    unit: str  # "" for identifiers and counts without a physical unit
    meaning: str
    numeric: bool = False  # read as a number in ok rows (an empty cell becomes NaN)
    # "<part>.<name>": the cell is that value of a part of the trial (SOURCES) as it is, empty
    # when the part is missing (a failed trial's); "": the row builder derives the cell. Only
    # LEADING_COLUMNS and METRIC_COLUMNS, which every row has, copy a source.
    source: str = ""

    def described(self) -> dict[str, str]:
        """What a run's manifest records of a column (a workload's): name, unit and meaning."""
        return {"name": self.name, "unit": self.unit, "meaning": self.meaning}


LEADING_COLUMNS: tuple[Column, ...] = (
    Column(
        "trial_id",
        "",
        "planned trial, e.g. t001; a retried trial keeps its id",
        source="trial.trial_id",
    ),
    Column(
        "attempt", "", "1 for the first try of the trial, 2 for its first retry, ...", numeric=True
    ),
    Column("status", "", "ok, or failed (then `error` says why); only ok rows are results"),
    Column("error", "", "one-line reason for a failed attempt, empty when ok"),
    Column(
        "order_index",
        "",
        "position of the trial in the planned order, from 0",
        numeric=True,
        source="trial.index",
    ),
    Column(
        "block",
        "",
        "randomization block (randomized-blocked) or grid point (sequential)",
        source="trial.block",
    ),
    Column(
        "repetition",
        "",
        "repetition of this grid point, from 1",
        numeric=True,
        source="trial.repetition",
    ),
    Column("workload", "", f"the workload's kind ([workload] kind): {', '.join(SPECS)}"),
)

METRIC_COLUMNS: tuple[Column, ...] = (
    Column("client_window_on_wire", "B", "stream window the client announced (nghttp2: 2^N - 1)"),
    Column(
        "t_wall_start_ns",
        "ns",
        "client's wall clock at the fetch start (Unix epoch)",
        numeric=True,
        source="client.t_wall_start_ns",
    ),
    Column(
        "t_wall_end_ns",
        "ns",
        "client's wall clock at the fetch end",
        numeric=True,
        source="client.t_wall_end_ns",
    ),
    Column(
        "client_response_s",
        "s",
        "connect start -> last byte of the last resource",
        numeric=True,
        source="client.response_s",
    ),
    Column(
        "client_ttfb_s",
        "s",
        "connect start -> the page's response headers",
        numeric=True,
        source="client.ttfb_s",
    ),
    Column(
        "client_connect_s",
        "s",
        "connect start -> connection ready: TCP, and for protocol h2 the TLS handshake "
        "(empty on the nghttp2 engine)",
        numeric=True,
        source="client.connect_s",
    ),
    Column(
        "client_connect_cpu_s",
        "s",
        "client agent process CPU time over that span (h2 engine)",
        numeric=True,
        source="client.connect_cpu_s",
    ),
    Column(
        "client_tls_version",
        "",
        "the TLS version negotiated (TLSv1.3), empty in cleartext",
        source="client.tls_version",
    ),
    Column(
        "client_event_loop",
        "",
        "the client agent's event loop, asyncio or uvloop (run.event_loop); empty on the "
        "nghttp2 engine",
        source="client.event_loop",
    ),
    Column(
        "client_cpu_s",
        "s",
        "client agent process CPU time (user + sys) over the fetch",
        numeric=True,
        source="client.cpu_s",
    ),
    Column(
        "client_cpu_pct",
        "%",
        "100 x client_cpu_s / client_response_s: percent of one core over the response time",
        numeric=True,
    ),
    Column(
        "client_process_s",
        "s",
        "the client's trial process, from its start to its reaping, start-up included "
        '(local nodes; empty for SSH nodes); the energy window "process" spans it',
        numeric=True,
    ),
    Column(
        "client_process_cpu_s",
        "s",
        "CPU time (user + sys) of that whole process and the children it waited for",
        numeric=True,
    ),
    Column(
        "client_rss_peak_bytes",
        "B",
        "client agent peak resident set size over the fetch",
        numeric=True,
        source="client.rss_peak_bytes",
    ),
    Column(
        "client_bytes_received",
        "B",
        "bytes the client received, frame headers included",
        numeric=True,
    ),
    Column("client_bytes_sent", "B", "bytes the client sent, frame headers included", numeric=True),
    Column(
        "client_interface_bytes",
        "B",
        "bytes on the client node's network interface while its trial process ran, both "
        "directions, TCP/IP headers included (local nodes; loopback: each frame once, shared)",
        numeric=True,
    ),
    Column(
        "client_interface_packets",
        "",
        "packets on that interface over the same span, likewise",
        numeric=True,
    ),
    Column("client_data_frames", "", "DATA frames the client received", numeric=True),
    Column("client_window_update_frames", "", "WINDOW_UPDATE frames the client sent", numeric=True),
    Column(
        "server_serve_s",
        "s",
        "first request received -> last byte handed to the kernel",
        numeric=True,
        source="server.serve_s",
    ),
    Column(
        "server_cpu_s",
        "s",
        "server agent process CPU time over its serve window",
        numeric=True,
        source="server.cpu_s",
    ),
    Column(
        "server_cpu_pct",
        "%",
        "server CPU time / serve time, percent of one core",
        numeric=True,
        source="server.cpu_pct",
    ),
    Column(
        "server_cpu_peak_pct",
        "%",
        "server CPU use over its busiest 100 ms interval of the trial, percent of one core",
        source="server.cpu_peak_pct",
    ),
    Column(
        "server_rss_peak_bytes",
        "B",
        "server agent peak resident set size over the trial",
        numeric=True,
        source="server.rss_peak_bytes",
    ),
    Column(
        "server_bytes_sent", "B", "bytes the server sent on the trial's connection", numeric=True
    ),
    Column("server_data_frames", "", "DATA frames the server sent", numeric=True),
    Column(
        "energy_mj",
        "mJ",
        "client node energy: measured power integrated over the window",
        numeric=True,
    ),
    Column(
        "energy_above_idle_mj",
        "mJ",
        "energy_mj minus idle power x window duration",
        numeric=True,
    ),
    Column("mean_power_mw", "mW", "energy_mj / window duration", numeric=True),
    Column(
        "window_s",
        "s",
        "duration of the energy window: the fetch and its connection's close, or the client's "
        "trial process (manifest energy_window)",
        numeric=True,
        source="energy.duration_s",
    ),
    Column(
        "window_start_s",
        "s",
        "start of the window on the meter's timebase (index / rate)",
        source="power.start_s",
    ),
    Column(
        "window_source",
        "",
        "marker (edges in the sample stream) or clock (mapped times)",
        source="power.source",
    ),
    Column(
        "samples",
        "",
        "meter samples the energy depends on: those inside the window and the one either "
        "side each edge is interpolated from",
        numeric=True,
        source="energy.samples",
    ),
    Column(
        "samples_lost",
        "",
        "samples missing inside the window (gaps, device drops)",
        numeric=True,
        source="power.samples_lost",
    ),
    Column(
        "samples_saturated",
        "",
        "samples inside the window at the meter's full scale (clipped: the energy is a lower "
        "bound); data/README.md says what counts per source",
        numeric=True,
        source="power.samples_saturated",
    ),
    Column(
        "meter_crc_errors",
        "",
        "corrupt meter frames skipped during the trial",
        numeric=True,
        source="power.crc_errors",
    ),
    Column(
        "meter_frame_gaps",
        "",
        "meter frames missed (sequence gaps) during the trial",
        numeric=True,
        source="power.frame_gaps",
    ),
)
"""The common metrics, in every run after the axes (and a search's or bench's columns)."""

PHASES = ("connect", "exchange", "close")
"""A trial window's phases, in order (controller.sweep.phases)."""
_PHASE_MEANING = {
    "connect": "the window's start -> the connection usable (TCP and TLS, or QUIC's handshake)",
    "exchange": "the connection usable -> the workload's last response byte",
    "close": "the last byte -> the connection closed (GOAWAY and TCP's close, or QUIC's "
    "CONNECTION_CLOSE sent) and the window's end",
}
PHASE_COLUMNS: tuple[Column, ...] = (
    Column(
        "phase_clock",
        "",
        "how the client's phase boundaries were placed on the meter's samples: marker (a "
        "linear map between the marker's edges on both clocks, drift removed) or clock_offset "
        "(the measured clock offset); empty where the engine records no phases (nghttp2)",
    ),
    *(
        Column(
            f"phase_{phase}_s",
            "s",
            f"{phase} phase on the meter's timebase: {meaning}",
            numeric=True,
        )
        for phase, meaning in _PHASE_MEANING.items()
    ),
    *(
        Column(
            f"energy_{phase}_mj",
            "mJ",
            f"energy over the {phase} phase; the three phases sum to energy_mj",
            numeric=True,
        )
        for phase in PHASES
    ),
    *(
        Column(
            f"energy_{phase}_above_idle_mj",
            "mJ",
            f"energy_{phase}_mj minus idle power x phase_{phase}_s",
            numeric=True,
        )
        for phase in PHASES
    ),
)
"""Every trial window's phases, after the common metrics (empty where the engine cannot tell
its phases apart, or the trial failed)."""


SETTINGS_COLUMNS: tuple[Column, ...] = (
    Column(
        "settings_mismatch",
        "",
        "1 where a setting the point asked is in force at another value on either side "
        "(nghttp2's 2^N - 1 windows, an engine's defaults), else 0; empty where the client "
        "record has no announcement (a trial that never ran, an agent before it)",
        numeric=True,
    ),
    Column(
        "settings_mismatches",
        "",
        "each such setting, '; '-separated: 'NAME ASKED asked, VALUE in force (SIDE KEY)', "
        "KEY the protocol's own name of what carries it",
    ),
    Column(
        "client_header_table_bytes",
        "B",
        "header compression's dynamic table the client announced, the most the server's "
        "encoder may use for what it sends (HPACK SETTINGS_HEADER_TABLE_SIZE; QPACK "
        "SETTINGS_QPACK_MAX_TABLE_CAPACITY); empty where not observed",
        numeric=True,
    ),
    Column(
        "server_header_table_bytes",
        "B",
        "the server's, as the client received it (or, where the client cannot see it, as the "
        "server's record says it announced it): the most the client's encoder may use; empty "
        "where neither side observed it",
        numeric=True,
    ),
)
"""What was in force, not only asked (agent.protocols.in_force), in every run recorded since:
the full announcements are events.jsonl's `settings_in_force`."""


SEARCH_COLUMNS: tuple[Column, ...] = (
    Column(
        "search_group",
        "",
        "search runs only: a breakdown search's group (a point of the sweep's axes), from 1; "
        "an optimizing search's is 1",
    ),
    Column(
        "search_probe",
        "",
        "search runs only: the group's probe (an optimizing search's proposal), from 1",
    ),
)
BENCH_COLUMNS: tuple[Column, ...] = (
    Column(
        "bench",
        "",
        "shared-study runs only (`h2iot sweep --study URL --bench NAME`): the bench that ran "
        "the trial",
    ),
)
QUIC_COLUMNS: tuple[Column, ...] = (
    Column("client_datagrams_received", "", "h3 runs only: UDP datagrams the client received"),
    Column(
        "client_datagrams_sent",
        "",
        "h3 runs only: UDP datagrams the client sent; over a download nearly all carry only its "
        "ACKs, which its ACK policy (ack_eliciting_threshold) sets",
    ),
    Column(
        "client_packets_lost", "", "h3 runs only: packets the client's QUIC stack declared lost"
    ),
    Column("client_pto_count", "", "h3 runs only: the client's probe timeouts (PTO)"),
    Column(
        "server_max_stream_data_frames",
        "",
        "h3 runs only: MAX_STREAM_DATA frames from the client that raised a stream's limit, as "
        "the server received them",
    ),
    Column("server_max_data_frames", "", "h3 runs only: MAX_DATA frames likewise"),
    Column(
        "server_stream_credit_ahead_bytes",
        "B",
        "h3 runs only: the largest stream limit the client granted less what the server had "
        "sent on that stream when the grant arrived (a fixed window keeps it at most the window)",
    ),
    Column(
        "server_packets_lost", "", "h3 runs only: packets the server's QUIC stack declared lost"
    ),
    Column("server_pto_count", "", "h3 runs only: the server's probe timeouts (PTO)"),
)
"""What an HTTP/3 trial adds (a run whose protocols include h3): its QUIC counts, empty in
the rows of its HTTP/2 trials."""

CONDITION_ROLES = ("client", "server")
CONDITION_FIELDS: tuple[Column, ...] = (
    Column(
        "cpu_freq_mhz",
        "MHz",
        "lowest current clock of the node's CPUs (cpufreq) at the trial's start and end",
    ),
    Column("governor", "", "the cpufreq governor of those CPUs; '+' joins different ones"),
    Column("temp_c", "degC", "hottest thermal zone of the node at the trial's start or end"),
    Column(
        "throttled_flags",
        "",
        "Raspberry Pi firmware flags (vcgencmd get_throttled), ORed over start and end, hex: "
        "bits 0-3 under-voltage, clock capped, throttled, soft temperature limit now; "
        "bits 16-19 the same since boot",
    ),
    Column(
        "other_cpu_pct",
        "%",
        "CPU time other processes took on the node agent's CPUs over the trial, percent of "
        "one core (10 ms ticks)",
    ),
    Column(
        "conditions_missing",
        "",
        "the fields above, and the kernel's counts after them, this node could not read, and why "
        "('field: reason; ...')",
    ),
)
"""Per node (`<role>_<name>`): its conditions over the trial, read by its agent (empty when
the node has no such reading; `conditions_missing` says why)."""

_NODE_WIDE = "node-wide: other processes' packets count too"
KERNEL_FIELDS: tuple[Column, ...] = (
    Column(
        "net_rx_softirqs",
        "",
        f"NET_RX softirqs on the node agent's CPUs over the trial (/proc/softirqs; {_NODE_WIDE})",
    ),
    Column("net_tx_softirqs", "", f"NET_TX softirqs likewise ({_NODE_WIDE})"),
    Column(
        "voluntary_ctx_switches",
        "",
        "the trial process's voluntary context switches over the trial (it waited: I/O, a lock), "
        "a C engine's tool's included",
    ),
    Column(
        "involuntary_ctx_switches", "", "the trial process's involuntary ones (it was preempted)"
    ),
    Column(
        "udp_datagrams_in",
        "",
        f"UDP datagrams the node received over the trial (/proc/net/snmp Udp InDatagrams, the "
        f"node's network namespace; {_NODE_WIDE})",
    ),
    Column("udp_datagrams_out", "", f"UDP datagrams it sent (OutDatagrams; {_NODE_WIDE})"),
    Column(
        "udp_rcvbuf_errors",
        "",
        f"UDP datagrams its kernel dropped for a full receive buffer (RcvbufErrors; {_NODE_WIDE})",
    ),
    Column("tcp_segments_in", "", f"TCP segments it received (Tcp InSegs; {_NODE_WIDE})"),
    Column("tcp_segments_out", "", f"TCP segments it sent (OutSegs; {_NODE_WIDE})"),
    Column(
        "tcp_retransmitted_segments",
        "",
        f"TCP segments it retransmitted (RetransSegs; {_NODE_WIDE})",
    ),
)
"""Per node (`<role>_<name>`): the kernel's work over the trial, counted by its agent
(agent.kernel_counters; empty in runs recorded before them, and where the node cannot read one:
`conditions_missing` says why)."""


# A column's unit, read from its name's ending (units in names: `latency_max_s`, `body_bytes`).
_UNIT_SUFFIXES = (
    ("_bytes", "B"),
    ("_mj", "mJ"),
    ("_mw", "mW"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_pct", "%"),
    ("_hz", "Hz"),
    ("_rps", "1/s"),
)


def unit_of(name: str) -> str:
    return next((unit for suffix, unit in _UNIT_SUFFIXES if name.endswith(suffix)), "")


def label_of(name: str) -> str:
    """A column's name in words, without the unit its name ends with (tables and axes give the
    unit beside it): `periodic_energy_per_report_mj` -> "periodic energy per report"."""
    suffix = next((s for s, _ in _UNIT_SUFFIXES if name.endswith(s)), "")
    return name.removesuffix(suffix).replace("_", " ")


def _per_node(fields: tuple[Column, ...]) -> tuple[Column, ...]:
    return tuple(
        Column(f"{role}_{field.name}", field.unit, f"{role} node: {field.meaning}")
        for role in CONDITION_ROLES
        for field in fields
    )


def condition_columns() -> tuple[Column, ...]:
    return _per_node(CONDITION_FIELDS)


def kernel_columns() -> tuple[Column, ...]:
    return _per_node(KERNEL_FIELDS)


EXCHANGE_ENERGY_FIELDS: tuple[Column, ...] = (
    Column("energy_per_report_mj", "mJ", "energy_mj / the exchanges the trial made (its count)"),
    Column("energy_per_report_above_idle_mj", "mJ", "energy_above_idle_mj / the same count"),
    Column(
        "idle_tail_energy_mj",
        "mJ",
        "energy above idle from each response's end to the next exchange's start (the last "
        "one's: to the window's end), summed over the exchanges that got a response; the "
        "exchanges' marks placed on the meter's samples as the phases are (phase_clock)",
    ),
    Column("idle_tail_mean_mj", "mJ", "that energy's mean per tail"),
    Column(
        "exchange_energy_mean_mj",
        "mJ",
        "energy above idle from each exchange's start (the connect's, or the request's on a "
        "kept connection) to its response's end, mean over the exchanges that got a response",
    ),
)
"""`<kind>_<name>` for a kind whose record lists its exchanges (its declaration's
`exchange_marks`): its trial's energy per exchange (controller.sweep.exchanges); the spans are
empty where the client's engine records no phases."""


def workload_columns(kind: str) -> tuple[Column, ...]:
    """The columns a workload adds, from its declaration's fields, then its energy per
    exchange where its record lists them, then its split of the exchange phase where it
    declares one."""
    spec = SPECS[kind]
    own = tuple(
        Column(f"{kind}_{field.name}", unit_of(field.name), field.doc) for field in spec.fields
    )
    if spec.exchange_marks:
        own += tuple(Column(f"{kind}_{c.name}", c.unit, c.meaning) for c in EXCHANGE_ENERGY_FIELDS)
    if spec.exchange_split is None:
        return own
    before, after = spec.exchange_split
    spans = {
        before: "the connection usable -> the first response's headers",
        after: "the first response's headers -> the last byte",
    }
    split = tuple(
        column
        for part, span in spans.items()
        for column in (
            Column(f"{kind}_{part}_s", "s", f"exchange's {part} part: {span}, meter timebase"),
            Column(
                f"{kind}_energy_{part}_mj",
                "mJ",
                f"energy over the {part} part; the two parts sum to energy_exchange_mj",
            ),
        )
    )
    return own + split


PROTOCOL_COLUMN = Column(
    "protocol",
    "",
    "what the trial ran over (agent.protocols: `h2c`, `h2` or `h3`), in every row: this column, "
    "or the sweep's `protocol` axis where a run sweeps it",
)
"""A run's protocol: a column of its own unless the run sweeps it (then the axis's column)."""


def _axis_column(name: str) -> Column:
    if name in SETTING_SPECS:
        return Column(name, "", f"swept HTTP/2 setting {name} (bytes or count)")
    return Column(name, unit_of(name), f"swept workload or flow-control value {name}")


def trial_columns(
    axes: tuple[str, ...],
    workload: str = DEFAULT_KIND,
    search: bool = False,
    quic: bool = False,
    *,
    bench: bool = False,
) -> tuple[Column, ...]:
    """A search's run has SEARCH_COLUMNS after the axes (a breakdown search's parameter first
    among them), a shared study's bench BENCH_COLUMNS after those; a run with HTTP/3 trials
    QUIC_COLUMNS after the common metrics and the phases."""
    swept = tuple(_axis_column(name) for name in axes)
    protocol = () if PROTOCOL_COLUMN.name in axes else (PROTOCOL_COLUMN,)
    probes = SEARCH_COLUMNS if search else ()
    benches = BENCH_COLUMNS if bench else ()
    own = workload_columns(workload)
    transport = QUIC_COLUMNS if quic else ()
    return (
        LEADING_COLUMNS + protocol + swept + probes + benches + METRIC_COLUMNS + SETTINGS_COLUMNS
        + PHASE_COLUMNS + transport + own + condition_columns() + kernel_columns()
    )  # fmt: skip


def header(
    axes: tuple[str, ...],
    workload: str = DEFAULT_KIND,
    search: bool = False,
    quic: bool = False,
    *,
    bench: bool = False,
) -> list[str]:
    return [column.name for column in trial_columns(axes, workload, search, quic, bench=bench)]


NUMERIC_COLUMNS: tuple[str, ...] = tuple(
    column.name
    for column in LEADING_COLUMNS + METRIC_COLUMNS + SETTINGS_COLUMNS + PHASE_COLUMNS
    if column.numeric
)
"""Columns converted to numbers in ok rows when present (empty cells become NaN)."""
