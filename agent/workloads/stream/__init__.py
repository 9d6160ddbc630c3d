"""Telemetry pushed over HTTP/2: "tune" items published at a demanded rate over SSE, WebSocket
(RFC 8441), gRPC server streaming or REST polling, and the rate the client actually gets."""
