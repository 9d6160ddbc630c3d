"""The api workload's set-up: its seeded SQLite database, built on the server node once per
distinct `records` (`h2iot-agent api-db`), so `records` can be a sweep axis."""

from __future__ import annotations

from collections.abc import Mapping

from agent.workloads import ParamValue
from controller.nodes.agent import AgentNode
from controller.workloads.served import Served


class ApiDatabases:
    def __init__(self, server: AgentNode, state_dir: str) -> None:
        self.server = server
        self.state_dir = state_dir
        self._built: dict[int, Served] = {}

    def __call__(self, setup: Mapping[str, ParamValue]) -> Served:
        records = int(setup["records"])
        if records not in self._built:
            node = self.server.node
            path = node.path(f"{self.state_dir}/api-inventory-{records}.sqlite")
            node.makedirs(self.state_dir)
            # Seeding a large table takes a while: not a trial's business, so no short timeout.
            argv = ["api-db", path, "--records", str(records)]
            node.run(self.server.command(*argv), timeout_s=1800)
            self._built[records] = Served(root=path)
        return self._built[records]
