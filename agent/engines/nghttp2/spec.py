"""The nghttp2 engine's declaration: the study's tools, `nghttp` (client) and `nghttpd`
(server), driven by the agent; the SETTINGS their options reach; windows as 2^N - 1 bytes
(agent.engines.nghttp2.windows). Over QUIC the nghttp2 project's sibling's tools instead,
ngtcp2's `gtlsclient` and `gtlsserver` (agent.engines.nghttp2.gtls): the C anchor for both
protocols, exact windows there."""

from agent.engines.spec import ClientRefusal, EngineSpec
from agent.protocols import protocols_where
from agent.workloads.page.spec import PAGE
from agent.workloads.periodic.protocol import KIND as PERIODIC

NGHTTP_SETTINGS = (
    "initial_window_size",
    "header_table_size",
    "max_concurrent_streams",
    "enable_push",
)
NGHTTPD_SETTINGS = ("initial_window_size", "header_table_size", "max_concurrent_streams")
NGTCP2_SETTINGS = ("initial_window_size",)
"""What the engine announces over QUIC (ngtcp2's gtlsclient and gtlsserver), as the transport
parameter initial_max_stream_data."""

_ONE_FETCH = "fetches its URLs at once and exits: it cannot idle between exchanges"
PERIODIC_REFUSALS = (
    ClientRefusal(
        PERIODIC, "connection", "keep", False, f"the nghttp2 engine's nghttp {_ONE_FETCH}"
    ),
    ClientRefusal(
        PERIODIC, "connection", "keep", True, f"the nghttp2 engine's gtlsclient {_ONE_FETCH}"
    ),
    ClientRefusal(
        PERIODIC,
        "connection",
        "resume",
        False,
        "the nghttp2 engine's nghttp fetches and exits, keeping no TLS session for the next "
        "run (it has no session or ticket option)",
    ),
)
"""What the engine's client cannot do of the periodic workload: a process per exchange runs
`new` (nghttp, gtlsclient) and `resume` (gtlsclient's session and transport-parameter files)."""

NGHTTP2 = EngineSpec(
    name="nghttp2",
    doc="the study's nghttp (client) and nghttpd (server); over QUIC ngtcp2's gtlsclient and "
    "gtlsserver",
    label="nghttpd",
    client_tool="nghttp",
    server_tool="nghttpd",
    serve="agent.engines.nghttp2.cli_support:serve",
    trial="agent.engines.nghttp2.cli_support:fetch",
    client_settings=NGHTTP_SETTINGS,
    server_settings=NGHTTPD_SETTINGS,
    window_map="agent.engines.nghttp2.windows:on_wire",
    client_window_update_policies=("half",),
    workloads=(PAGE.kind,),
    # nghttpd and gtlsserver serve files: the periodic workload's server is the agent's own.
    client_workloads=(PERIODIC,),
    checks_certificates=False,
    debian_packages=(
        ("nghttp", "nghttp2-client"),
        ("nghttpd", "nghttp2-server"),
        ("gtlsclient", "ngtcp2-client"),
        ("gtlsserver", "ngtcp2-server"),
    ),
    quic_tools=("gtlsclient", "gtlsserver"),
    quic_settings=NGTCP2_SETTINGS,
    quic_stack="ngtcp2",
    # nghttp -v's and nghttpd -v's frame logs as our HTTP/2 frame events; gtlsclient's and
    # gtlsserver's own qlog, kept as written (agent.engines.nghttp2.server_traces).
    client_traces=protocols_where(),
    server_traces=protocols_where(),
    client_phases=False,
    trial_counting=("control",),
    quic_client_counted_by_control=True,
    client_refusals=PERIODIC_REFUSALS,
)
