"""HTTP/2 (RFC 9113) for the agent: its sans-IO parts, and its two forms as protocols."""
