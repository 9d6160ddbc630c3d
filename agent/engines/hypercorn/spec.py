"""The hypercorn engine's declaration: a server of the api workload only."""

from agent.engines.spec import EngineSpec
from agent.protocols import protocols_where
from agent.workloads.api.spec import API

HYPERCORN_SETTINGS = {
    "max_concurrent_streams": "h2_max_concurrent_streams",
    "max_header_list_size": "h2_max_header_list_size",
    "max_frame_size": "h2_max_inbound_frame_size",
}
"""The SETTINGS it can announce: our canonical names -> hypercorn's Config attribute (any other
is refused, by the agent and at config load)."""

HYPERCORN = EngineSpec(
    name="hypercorn",
    doc="hypercorn + Starlette, a server of the api workload",
    label="hypercorn + Starlette",
    client_tool=None,
    server_tool="hypercorn",
    serve="agent.engines.hypercorn.serve:serve",
    server_settings=tuple(HYPERCORN_SETTINGS),
    protocols=protocols_where(quic=False),
    workloads=(API.kind,),
    trial_counting=("control",),
)
