"""HTTP/3 as the testbed names it (agent.protocols loads this without loading qh3)."""

from agent.protocols.spec import ProtocolSpec

H3 = ProtocolSpec(
    name="h3",
    doc="HTTP/3 over QUIC v1 (RFC 9114, RFC 9000; always encrypted)",
    tls=True,
    quic=True,
    alpn="h3",
    settings_map="agent.h3.settings",
    extra="h3",
    stack_module="qh3",
)
