"""HTTP/2's two forms as the testbed names them (agent.protocols loads these)."""

from agent.protocols.spec import ProtocolSpec

H2C = ProtocolSpec(
    name="h2c",
    doc="HTTP/2 in cleartext with prior knowledge (RFC 9113 3.3), the study's",
    tls=False,
    quic=False,
    alpn=None,
)
H2 = ProtocolSpec(
    name="h2",
    doc="HTTP/2 over TLS 1.3 with ALPN h2",
    tls=True,
    quic=False,
    alpn="h2",
)
