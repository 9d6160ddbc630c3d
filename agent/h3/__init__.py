"""HTTP/3 (RFC 9114 over QUIC v1, RFC 9000) for the agent: the `protocol = "h3"` side of a sweep.

The agent's own HTTP/3 runs on qh3 (the `h3` extra: a Rust QUIC core with a Python HTTP/3 layer,
wheels for every Raspberry Pi OS, and a fixed sliding flow-control window), client and server.
What is ours here is small and mostly pure: how the study's settings map onto QUIC's
(`settings`), the flow-control credit a data sender sees granted (`credit`), the UDP socket and
its drop counters (`udp`), the server's fixes for qh3's anti-amplification accounting
(`amplification`), the server's connection caps from the node's memory and its queue of
handshakes under way (`admission`), qh3's configuration with a tap on its core (`stack`) and
request streams under HTTP/2's names, for exchanges sent piece by piece (`wire`). The thin I/O
wrappers that give the workloads the same requests and records HTTP/2 gives them live beside
HTTP/2's: agent/client/h3*.py and agent/server/h3*.py, above this package, which knows neither.
Nothing here is imported unless a trial runs over h3.
"""
