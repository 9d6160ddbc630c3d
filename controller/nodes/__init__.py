"""Nodes: the machines the agents run on, reached through one interface over two transports.

- `Node` runs commands (with a timeout enforced on the node), background processes by pidfile,
  file reads (whole, or new lines since an offset), file copies and clock-offset measurements,
  over a `LocalTransport` (subprocesses) or an `SshTransport` (fabric, host keys checked).
- `connect(NodeConfig)` opens the right one; `fan_out` runs work per node and keeps every
  node's outcome (`GroupOutcome`), failures included.
- `AgentNode` drives the node agent's CLI: server start/stop/health/log, client fetches, the
  server's per-trial records.
- `check_node` and `install` (with `controller.nodes.wheel`) back `h2iot nodes check|deploy`.

Nothing is imported here: a local node's anchor (`python -m controller.nodes.anchor`) runs
in this package, and importing it must not load fabric and paramiko for every node. Import
each name from its module.
"""
