"""The page workload's set-up: the deterministic site, built on the server node once per
distinct (`site_seed`, `total_bytes`), so either can be a sweep axis."""

from __future__ import annotations

from collections.abc import Mapping

from agent.workloads import ParamValue
from controller.nodes.agent import AgentNode
from controller.workloads.served import Served


class PageSites:
    def __init__(self, server: AgentNode, state_dir: str, *, client_shares_host: bool) -> None:
        self.server = server
        self.state_dir = state_dir
        # A client on the server's host reads the manifest from the site; others GET it.
        self.client_shares_host = client_shares_host
        self._built: dict[tuple[int, int], Served] = {}

    def __call__(self, setup: Mapping[str, ParamValue]) -> Served:
        key = (int(setup["site_seed"]), int(setup["total_bytes"]))
        if key not in self._built:
            seed, total_bytes = key
            # The first site keeps the plain name the run folder has always had.
            name = "site" if not self._built else f"site-{seed}-{total_bytes}"
            site = self.server.build_site(
                f"{self.state_dir}/{name}", seed=seed, total_bytes=total_bytes
            )
            manifest = f"{site}/manifest.json" if self.client_shares_host else None
            self._built[key] = Served(root=site, manifest=manifest)
        return self._built[key]
