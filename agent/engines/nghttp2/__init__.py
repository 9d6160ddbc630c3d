"""The nghttp2 engine: the study's own HTTP/2 implementation (nghttp, nghttpd) driven by the
agent, producing the same fetch records and per-trial server records as the h2 engine.

- `windows`: nghttp2 takes windows as 2^N - 1 bytes; exact byte counts are mapped or rejected.
- `tools`: the binaries and the Debian packages that provide them.
- `har`, `stats`: parsers of nghttp's HAR (`-r`) and statistics (`-s`) output.
- `client`: one nghttp process per page fetch, and its record.
- (the trial-control messages a client sends nghttpd's agent around a fetch: agent.trial_control,
  shared with the other external engines.)
- `procfs`, `accounting`: nghttpd's CPU, memory and bytes per trial, read from /proc.
- `server`: nghttpd as the agent's child, with the trial log.
"""
