"""The `builtin` engine: the agent's own stacks (python-hyper/h2 with the agent's fast path for
HTTP/2, qh3 for HTTP/3), client and server, any SETTINGS, exact windows."""
