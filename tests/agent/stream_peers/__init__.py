"""Peers of the stream workload's tests: an ASGI app for hypercorn (SSE and WebSocket over
RFC 8441), a grpcio server, and a bare h2 client (the h2 library, not our client) for what no
other RFC 8441 client exists for."""
