"""The builtin engine's declaration."""

from agent.engines.spec import EngineSpec
from agent.protocols import protocols_where

BUILTIN = EngineSpec(
    name="builtin",
    doc="this agent's own HTTP/2 (h2 + its fast path) and HTTP/3 (qh3), client and server",
    label="agent (h2)",
    client_tool="h2iot-agent",
    server_tool="h2iot-agent",
    serve="agent.engines.builtin.serve:serve",
    trial="agent.engines.builtin.trial:run",
    event_loop=True,
    client_traces=protocols_where(),
    server_traces=protocols_where(),
    quic_ack_policy=True,
    reloads_settings=True,
    connection_limits=True,
    # Control messages too, for a client that sends no trial header (ngtcp2's gtlsclient).
    trial_counting=("header", "control"),
)
